select
    o.order_id,
    o.customer_id,
    o.order_date,
    o.status,
    coalesce(p.amount, 0) as amount,
    coalesce(p.card_amount, 0) as card_amount,
    coalesce(p.voucher_amount, 0) as voucher_amount
from {{ ref('stg_orders') }} as o
left join {{ ref('order_payments') }} as p using (order_id)

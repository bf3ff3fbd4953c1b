-- one row per order with what was paid, by method
select
    order_id,
    sum(amount) as amount,
    sum(case when payment_method = 'card' then amount else 0 end) as card_amount,
    sum(case when payment_method = 'voucher' then amount else 0 end) as voucher_amount,
    count(*) as payment_count
from {{ ref('stg_payments') }}
group by order_id

select
    order_date,
    count(*) as orders,
    sum(amount) as revenue
from {{ ref('orders') }}
where status <> 'returned'
group by order_date

with customer_orders as (
    select
        customer_id,
        min(order_date) as first_order_date,
        max(order_date) as most_recent_order_date,
        count(*) as number_of_orders,
        sum(amount) as lifetime_value
    from {{ ref('orders') }}
    where status <> 'returned'
    group by customer_id
)

select
    c.customer_id,
    c.first_name,
    c.last_name,
    c.signup_date,
    co.first_order_date,
    co.most_recent_order_date,
    coalesce(co.number_of_orders, 0) as number_of_orders,
    coalesce(co.lifetime_value, 0) as lifetime_value
from {{ ref('stg_customers') }} as c
left join customer_orders as co using (customer_id)

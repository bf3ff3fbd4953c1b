with

customers as (

    select * from {{ ref('stg_customers') }}

),

orders as (

    select * from {{ ref('orders') }}

),

refunds as (

    select * from {{ ref('stg_refunds') }}

),

customer_orders as (

    select
        customer_id,
        min(ordered_at) as first_order,
        max(ordered_at) as most_recent_order,
        count(order_id) as number_of_orders,
        sum(amount) as lifetime_spend

    from orders

    group by 1

),

customer_refunds as (

    select
        orders.customer_id,
        sum(refunds.refund_amount) as lifetime_refunds

    from refunds

    join orders on refunds.order_id = orders.order_id

    group by 1

),

final as (

    select
        customers.customer_id,
        customers.first_name,
        customers.last_name,
        customers.customer_name,
        customer_orders.first_order,
        customer_orders.most_recent_order,
        coalesce(customer_orders.number_of_orders, 0) as number_of_orders,
        coalesce(customer_orders.lifetime_spend, 0)
            - coalesce(customer_refunds.lifetime_refunds, 0) as customer_lifetime_value,
        case
            when customer_orders.number_of_orders > 1 then 'returning'
            else 'new'
        end as customer_type

    from customers

    left join customer_orders on customers.customer_id = customer_orders.customer_id

    left join customer_refunds on customers.customer_id = customer_refunds.customer_id

)

select * from final

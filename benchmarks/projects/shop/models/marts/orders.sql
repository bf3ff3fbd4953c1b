{%- set payment_methods = var('payment_methods') -%}

with

orders as (

    select * from {{ ref('stg_orders') }}

),

order_items as (

    select * from {{ ref('order_items') }}

),

payments as (

    select * from {{ ref('stg_payments') }}

),

order_items_summary as (

    select
        order_id,
        count(order_item_id) as order_items_count,
        sum(supply_cost) as order_cost,
        sum(case when is_food_item then 1 else 0 end) as food_items_count,
        sum(case when is_drink_item then 1 else 0 end) as drink_items_count

    from order_items

    group by 1

),

order_payments as (

    select
        order_id,
        {% for payment_method in payment_methods -%}
        sum(case when payment_method = '{{ payment_method }}' then amount else 0 end)
            as {{ payment_method }}_amount,
        {% endfor -%}
        sum(amount) as total_amount

    from payments

    group by 1

),

final as (

    select
        orders.order_id,
        orders.customer_id,
        orders.ordered_at,
        orders.status,
        orders.subtotal,
        orders.tax_paid,
        orders.order_total,
        {% for payment_method in payment_methods -%}
        coalesce(order_payments.{{ payment_method }}_amount, 0) as {{ payment_method }}_amount,
        {% endfor -%}
        coalesce(order_payments.total_amount, 0) as amount,
        coalesce(order_items_summary.order_items_count, 0) as order_items_count,
        coalesce(order_items_summary.order_cost, 0) as order_cost,
        coalesce(order_items_summary.food_items_count, 0) > 0 as is_food_order,
        coalesce(order_items_summary.drink_items_count, 0) > 0 as is_drink_order

    from orders

    left join order_payments on orders.order_id = order_payments.order_id

    left join order_items_summary on orders.order_id = order_items_summary.order_id

)

select * from final

-- Units sold, revenue and margin per product, over every order that was not returned.
with

products as (

    select * from {{ ref('stg_products') }}

),

sold as (

    select order_items.*
    from {{ ref('order_items') }} as order_items
    join {{ ref('stg_orders') }} as orders on order_items.order_id = orders.order_id
    where orders.status not in ('returned', 'return_pending')

)

select
    products.product_id,
    products.product_name,
    products.product_type,
    count(sold.order_item_id) as units_sold,
    coalesce(sum(sold.price_paid), 0) as revenue,
    coalesce(sum(sold.price_paid - sold.supply_cost), 0) as gross_margin

from products

left join sold on sold.product_id = products.product_id

group by products.product_id, products.product_name, products.product_type

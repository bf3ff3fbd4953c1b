-- Each subscription with its product and what it brings in per month.
with subscriptions as (

    select * from {{ ref('stg_stripe__subscription') }}

),

prices as (

    select * from {{ ref('stg_stripe__price') }}

),

products as (

    select * from {{ ref('stg_stripe__product') }}

)

select
    subscriptions.subscription_id,
    subscriptions.customer_id,
    subscriptions.status,
    subscriptions.created_at,
    subscriptions.canceled_at,
    products.product_id,
    products.product_name,
    prices.recurring_interval,
    subscriptions.quantity,
    case prices.recurring_interval
        when 'year' then prices.unit_amount * subscriptions.quantity / 12
        else prices.unit_amount * subscriptions.quantity
    end as monthly_amount

from subscriptions

join prices on subscriptions.price_id = prices.price_id

join products on prices.product_id = products.product_id

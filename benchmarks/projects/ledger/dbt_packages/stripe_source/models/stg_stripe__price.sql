with base as (

    select * from {{ source('stripe', 'price') }}

),

fields as (

    select
        id as price_id,
        product_id,
        unit_amount,
        currency,
        recurring_interval,
        active as is_active

    from base

)

select * from fields

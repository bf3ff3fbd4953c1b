with base as (

    select * from {{ source('stripe', 'product') }}

),

fields as (

    select
        id as product_id,
        name as product_name,
        active as is_active,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

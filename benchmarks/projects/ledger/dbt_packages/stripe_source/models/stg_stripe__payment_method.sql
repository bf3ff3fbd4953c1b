with base as (

    select * from {{ source('stripe', 'payment_method') }}

),

fields as (

    select
        id as payment_method_id,
        customer_id,
        type,
        card_brand,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

with base as (

    select * from {{ source('stripe', 'subscription') }}

),

fields as (

    select
        id as subscription_id,
        customer_id,
        status,
        price_id,
        quantity,
        {{ stripe_source.epoch_to_timestamp('current_period_start') }} as current_period_started_at,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at,
        {{ stripe_source.epoch_to_timestamp('canceled_at') }} as canceled_at

    from base

)

select * from fields

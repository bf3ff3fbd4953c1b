with base as (

    select * from {{ source('stripe', 'balance_transaction') }}

),

fields as (

    select
        id as balance_transaction_id,
        type,
        amount,
        fee,
        net,
        status,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at,
        {{ stripe_source.epoch_to_timestamp('available_on') }} as available_at

    from base

)

select * from fields

with base as (

    select * from {{ source('stripe', 'payout') }}

),

fields as (

    select
        id as payout_id,
        amount,
        status,
        balance_transaction_id,
        {{ stripe_source.epoch_to_timestamp('arrival_date') }} as arrives_at,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

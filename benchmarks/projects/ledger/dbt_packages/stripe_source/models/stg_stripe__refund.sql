with base as (

    select * from {{ source('stripe', 'refund') }}

),

fields as (

    select
        id as refund_id,
        charge_id,
        amount,
        status,
        reason,
        balance_transaction_id,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

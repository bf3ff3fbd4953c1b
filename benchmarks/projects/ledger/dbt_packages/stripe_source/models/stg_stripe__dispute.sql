with base as (

    select * from {{ source('stripe', 'dispute') }}

),

fields as (

    select
        id as dispute_id,
        charge_id,
        amount,
        status,
        reason,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

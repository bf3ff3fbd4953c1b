with base as (

    select * from {{ source('stripe', 'invoice') }}

),

fields as (

    select
        id as invoice_id,
        customer_id,
        subscription_id,
        status,
        amount_due,
        amount_paid,
        number as invoice_number,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

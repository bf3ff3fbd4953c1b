with base as (

    select * from {{ source('stripe', 'charge') }}

),

fields as (

    select
        id as charge_id,
        customer_id,
        invoice_id,
        amount,
        amount_refunded,
        status,
        paid as is_paid,
        balance_transaction_id,
        payment_method_id,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

with base as (

    select * from {{ source('stripe', 'customer') }}

),

fields as (

    select
        id as customer_id,
        email,
        name as customer_name,
        currency,
        delinquent as is_delinquent,
        is_deleted,
        {{ stripe_source.epoch_to_timestamp('created') }} as created_at

    from base

)

select * from fields

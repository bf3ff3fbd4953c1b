with base as (

    select * from {{ source('stripe', 'invoice_line_item') }}

),

fields as (

    select
        id as invoice_line_item_id,
        invoice_id,
        price_id,
        amount,
        quantity,
        description

    from base

)

select * from fields

with

source as (

    select * from {{ ref('raw_refunds') }}

),

renamed as (

    select
        id as refund_id,
        order_id,
        cast(refunded_on as date) as refunded_at,
        {{ cents_to_dollars('amount') }} as refund_amount,
        reason as refund_reason

    from source

)

select * from renamed

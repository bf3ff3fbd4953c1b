with

source as (

    select * from {{ ref('raw_order_items') }}

),

renamed as (

    select
        id as order_item_id,
        order_id,
        sku as product_id,
        {{ cents_to_dollars('price') }} as price_paid

    from source

)

select * from renamed

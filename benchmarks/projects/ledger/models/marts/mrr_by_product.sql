-- Monthly recurring revenue of active subscriptions per product.
select
    product_id,
    product_name,
    count(*) as active_subscriptions,
    {{ cents_to_usd('sum(monthly_amount)') }} as mrr_usd

from {{ ref('int_stripe__subscription_prices') }}

where status = 'active'

group by product_id, product_name

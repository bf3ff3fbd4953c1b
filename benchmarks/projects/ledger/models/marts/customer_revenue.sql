-- What each customer paid, got back and is worth per month today.
with charges as (

    select
        customer_id,
        sum(amount) as charged,
        sum(amount_refunded) as refunded,
        min(created_at) as first_charge_at,
        max(created_at) as last_charge_at

    from {{ ref('int_stripe__charge_details') }}

    group by customer_id

),

subscriptions as (

    select
        customer_id,
        sum(monthly_amount) as monthly_amount

    from {{ ref('int_stripe__subscription_prices') }}

    where status = 'active'

    group by customer_id

)

select
    customers.customer_id,
    customers.customer_name,
    charges.first_charge_at,
    charges.last_charge_at,
    {{ cents_to_usd('coalesce(charges.charged, 0)') }} as charged_usd,
    {{ cents_to_usd('coalesce(charges.refunded, 0)') }} as refunded_usd,
    {{ cents_to_usd('coalesce(subscriptions.monthly_amount, 0)') }} as mrr_usd

from {{ ref('stg_stripe__customer') }} as customers

left join charges on charges.customer_id = customers.customer_id

left join subscriptions on subscriptions.customer_id = customers.customer_id

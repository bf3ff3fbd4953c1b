-- One row per successful charge, in dollars, with its fee and what is left after refunds.
select
    charge_id,
    created_at,
    customer_id,
    customer_name,
    payment_method_type,
    {{ cents_to_usd('amount') }} as amount_usd,
    {{ cents_to_usd('amount_refunded') }} as refunded_usd,
    {{ cents_to_usd('fee') }} as fee_usd,
    {{ cents_to_usd('net - amount_refunded') }} as net_after_refunds_usd

from {{ ref('int_stripe__charge_details') }}

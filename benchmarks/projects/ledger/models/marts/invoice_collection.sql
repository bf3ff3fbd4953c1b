-- How much of what was invoiced each month has been collected, and what is disputed.
with invoices as (

    select * from {{ ref('stg_stripe__invoice') }}

),

disputed as (

    select charges.invoice_id, sum(disputes.amount) as disputed

    from {{ ref('stg_stripe__dispute') }} as disputes

    join {{ ref('stg_stripe__charge') }} as charges on disputes.charge_id = charges.charge_id

    group by charges.invoice_id

)

select
    date_trunc('month', invoices.created_at) as invoice_month,
    count(*) as invoices,
    {{ cents_to_usd('sum(invoices.amount_due)') }} as invoiced_usd,
    {{ cents_to_usd('sum(invoices.amount_paid)') }} as collected_usd,
    {{ cents_to_usd('coalesce(sum(disputed.disputed), 0)') }} as disputed_usd

from invoices

left join disputed on disputed.invoice_id = invoices.invoice_id

group by date_trunc('month', invoices.created_at)

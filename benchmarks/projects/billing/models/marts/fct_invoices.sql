-- One row per invoice with its account, plan and amounts in dollars.
with invoices as (
    select * from {{ ref('stg_invoices') }}
),

subscriptions as (
    select * from {{ ref('stg_subscriptions') }}
),

accounts as (
    select * from {{ ref('stg_accounts') }}
)

select
    invoices.invoice_id,
    invoices.invoiced_on,
    invoices.status,
    subscriptions.plan_code,
    accounts.account_id,
    accounts.country,
    {{ amount_net('invoices.net_cents') }} as net_usd,
    {{ cents_to_dollars('invoices.tax_cents') }} as tax_usd,
    {{ cents_to_dollars('invoices.gross_cents') }} as gross_usd
from invoices
join subscriptions on invoices.subscription_id = subscriptions.subscription_id
join accounts on subscriptions.account_id = accounts.account_id

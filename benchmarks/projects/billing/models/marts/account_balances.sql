-- What each account owes: invoiced gross (paid and open) minus what it paid.
with invoiced as (
    select account_id, sum(gross_usd) as invoiced_usd
    from {{ ref('fct_invoices') }}
    where status in ('paid', 'open')
    group by account_id
),

paid as (
    select fct.account_id, {{ cents_to_dollars('sum(payments.amount_cents)') }} as paid_usd
    from {{ ref('stg_payments') }} as payments
    join {{ ref('fct_invoices') }} as fct on payments.invoice_id = fct.invoice_id
    group by fct.account_id
)

select
    accounts.account_id,
    accounts.account_name,
    coalesce(invoiced.invoiced_usd, 0) as invoiced_usd,
    coalesce(paid.paid_usd, 0) as paid_usd,
    coalesce(invoiced.invoiced_usd, 0) - coalesce(paid.paid_usd, 0) as balance_usd
from {{ ref('stg_accounts') }} as accounts
left join invoiced on invoiced.account_id = accounts.account_id
left join paid on paid.account_id = accounts.account_id

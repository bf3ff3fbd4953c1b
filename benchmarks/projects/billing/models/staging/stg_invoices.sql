select
    invoice_id,
    subscription_id,
    cast(invoiced_on as date) as invoiced_on,
    net_cents,
    tax_cents,
    net_cents + tax_cents as gross_cents,
    status
from {{ ref('raw_invoices') }}

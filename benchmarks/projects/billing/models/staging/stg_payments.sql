select
    payment_id,
    invoice_id,
    cast(paid_on as date) as paid_on,
    amount_cents,
    method
from {{ ref('raw_payments') }}

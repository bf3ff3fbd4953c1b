-- Payouts to the bank account, with the balance movement each one made.
select
    payouts.payout_id,
    payouts.status,
    payouts.created_at,
    payouts.arrives_at,
    {{ cents_to_usd('payouts.amount') }} as amount_usd,
    {{ cents_to_usd('balance_transactions.net') }} as balance_change_usd

from {{ ref('stg_stripe__payout') }} as payouts

left join {{ ref('stg_stripe__balance_transaction') }} as balance_transactions
    on payouts.balance_transaction_id = balance_transactions.balance_transaction_id

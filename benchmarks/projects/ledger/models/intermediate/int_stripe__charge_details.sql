-- Every successful charge with what it cost in fees, how it was paid and who paid it.
with charges as (

    select * from {{ ref('stg_stripe__charge') }}
    where status = 'succeeded'

),

balance_transactions as (

    select * from {{ ref('stg_stripe__balance_transaction') }}

),

payment_methods as (

    select * from {{ ref('stg_stripe__payment_method') }}

),

customers as (

    select * from {{ ref('stg_stripe__customer') }}

)

select
    charges.charge_id,
    charges.created_at,
    charges.invoice_id,
    customers.customer_id,
    customers.customer_name,
    payment_methods.type as payment_method_type,
    charges.amount,
    charges.amount_refunded,
    balance_transactions.fee,
    balance_transactions.net

from charges

left join balance_transactions
    on charges.balance_transaction_id = balance_transactions.balance_transaction_id

left join payment_methods on charges.payment_method_id = payment_methods.payment_method_id

left join customers on charges.customer_id = customers.customer_id

-- Refunds per reason, with the charges they came from.
select
    refunds.reason,
    count(*) as refunds,
    count(distinct refunds.charge_id) as charges_refunded,
    {{ cents_to_usd('sum(refunds.amount)') }} as refunded_usd

from {{ ref('stg_stripe__refund') }} as refunds

where refunds.status = 'succeeded'

group by refunds.reason

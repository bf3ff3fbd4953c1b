select
    subscription_id,
    account_id,
    plan_code,
    cast(started_on as date) as started_on,
    cast(cancelled_on as date) as cancelled_on
from {{ ref('raw_subscriptions') }}

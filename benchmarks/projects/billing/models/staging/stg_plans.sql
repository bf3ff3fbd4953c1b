select
    plan_code,
    plan_name,
    monthly_price_cents
from {{ ref('raw_plans') }}

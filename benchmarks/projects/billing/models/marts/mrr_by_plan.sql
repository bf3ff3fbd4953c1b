-- Monthly recurring revenue of active subscriptions per plan, at the end of October 2025.
with active as (
    select *
    from {{ ref('stg_subscriptions') }}
    where started_on <= date '2025-10-31'
      and (cancelled_on is null or cancelled_on > date '2025-10-31')
)

select
    plans.plan_code,
    plans.plan_name,
    count(active.subscription_id) as active_subscriptions,
    {{ cents_to_dollars('coalesce(sum(plans.monthly_price_cents), 0)') }} as mrr_usd
from {{ ref('stg_plans') }} as plans
left join active on active.plan_code = plans.plan_code
group by plans.plan_code, plans.plan_name

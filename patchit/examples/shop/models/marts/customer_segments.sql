select
    customer_id,
    lifetime_value,
    case
        when lifetime_value >= 50 then 'gold'
        when lifetime_value >= 20 then 'silver'
        else 'bronze'
    end as segment
from {{ ref('customers') }}

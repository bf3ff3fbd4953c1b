select
    account_id,
    account_name,
    upper(country) as country,
    cast(signed_up_on as date) as signed_up_on
from {{ ref('raw_accounts') }}

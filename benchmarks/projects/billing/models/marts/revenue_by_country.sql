-- Paid net revenue per country and month.
select
    country,
    date_trunc('month', invoiced_on) as month,
    sum(net_usd) as net_revenue_usd,
    count(*) as paid_invoices
from {{ ref('fct_invoices') }}
where status = 'paid'
group by country, date_trunc('month', invoiced_on)

{%- set payment_methods = var('payment_methods') -%}

-- Revenue per day and payment method; returns are left out.
select
    ordered_at as order_date,
    count(order_id) as orders,
    {% for payment_method in payment_methods -%}
    sum({{ payment_method }}_amount) as {{ payment_method }}_revenue,
    {% endfor -%}
    sum(amount) as total_revenue

from {{ ref('orders') }}

where status not in ('returned', 'return_pending')

group by ordered_at

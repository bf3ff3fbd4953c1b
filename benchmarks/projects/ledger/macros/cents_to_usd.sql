{# Stripe amounts are in cents of the account's currency (USD here). #}
{% macro cents_to_usd(column_name) -%}
    cast(({{ column_name }}) / 100.0 as decimal(18, 2))
{%- endmacro %}

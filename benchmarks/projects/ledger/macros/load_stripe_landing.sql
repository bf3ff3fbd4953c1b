{#- Stands in for the EL sync (Fivetran, Airbyte): the raw Stripe tables, rebuilt from the
    landing files before every run, with the types the files carry. -#}
{% macro load_stripe_landing() %}
    {%- set tables = [
        'customer', 'product', 'price', 'subscription', 'invoice', 'invoice_line_item',
        'charge', 'refund', 'balance_transaction', 'payout', 'dispute', 'payment_method',
    ] -%}
    create schema if not exists {{ var('stripe_schema') }};
    {% for table in tables -%}
    create or replace table {{ var('stripe_schema') }}.{{ table }} as
        select * from read_csv('landing/stripe/{{ table }}.csv', header = true);
    {% endfor %}
{% endmacro %}

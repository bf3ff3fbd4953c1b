{# Stripe sends times as epoch seconds; the warehouse wants timestamps (UTC, no zone). #}
{% macro epoch_to_timestamp(column_name) -%}
    {{ return(adapter.dispatch('epoch_to_timestamp', 'stripe_source')(column_name)) }}
{%- endmacro %}

{% macro default__epoch_to_timestamp(column_name) -%}
    cast(to_timestamp({{ column_name }}) as timestamp)
{%- endmacro %}

{% macro duckdb__epoch_to_timestamp(column_name) -%}
    make_timestamp({{ column_name }} * 1000000)
{%- endmacro %}

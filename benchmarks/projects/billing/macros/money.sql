{# Money helpers: amounts are stored in cents; marts report dollars with two decimals. #}
{% macro cents_to_dollars(column) -%}
    round({{ column }} / 100.0, 2)
{%- endmacro %}

{% macro amount_net(net_cents) -%}
    round({{ net_cents }} / 100.0, 2)
{%- endmacro %}

{% macro amount_vat(net_cents) -%}
    round({{ net_cents }} * 0.19 / 100.0, 2)
{%- endmacro %}

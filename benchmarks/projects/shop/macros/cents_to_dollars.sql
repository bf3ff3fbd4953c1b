{# Every amount lands in cents; the shop reports dollars. One place decides the rounding. #}
{% macro cents_to_dollars(column_name, scale=2) -%}
    round(({{ column_name }} / 100)::numeric(16, {{ scale }}), {{ scale }})
{%- endmacro %}

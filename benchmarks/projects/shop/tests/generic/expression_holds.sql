{% test expression_holds(model, expression) %}

-- the rows of the model where the expression does not hold (none when it always does)
select *
from {{ model }}
where not ({{ expression }})

{% endtest %}

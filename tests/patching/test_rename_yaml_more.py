"""A column rename followed further into YAML (jaffle-shop's shapes): the semantic models built
on the model (`semantic_models:` with entities, dimensions and measures read by `expr` or by
their name), and the SQL arguments of the model's generic tests."""

from __future__ import annotations

from ruamel.yaml import YAML

from patchit.patching.fixits.rename_sites import Refusal
from patchit.patching.fixits.rename_yaml import follow_in_yaml

ORDERS = """\
models:
  - name: orders
    columns:
      - name: order_total
        description: The total amount of the order, tax included.
      - name: ordered_at

semantic_models:
  - name: orders
    defaults:
      agg_time_dimension: ordered_at
    model: ref('orders')
    entities:
      - name: order_id
        type: primary
    dimensions:
      - name: ordered_at
        expr: ordered_at
        type: time
        type_params:
          time_granularity: day
      - name: order_total_dim
        type: categorical
        expr: "case when order_total > 100 then 'big' else 'small' end"
    measures:
      - name: order_total
        description: The total amount for each order including taxes.
        agg: sum
      - name: order_count
        expr: 1
        agg: sum
  - name: customers
    model: ref('customers')
    measures:
      - name: order_total
        agg: sum
"""


def test_the_rename_reaches_the_semantic_model_and_keeps_its_names() -> None:
    out = follow_in_yaml(ORDERS, "orders", {"order_total": "order_total_usd",
                                            "ordered_at": "order_placed_at"})  # fmt: skip
    assert not isinstance(out, Refusal)
    doc = YAML(typ="safe").load(out)
    orders, customers = doc["semantic_models"]
    dims = {d["name"]: d for d in orders["dimensions"]}
    measures = {m["name"]: m for m in orders["measures"]}
    # an expr reads the new column; a measure read by its name gets one; names stay
    assert dims["ordered_at"]["expr"] == "order_placed_at"
    assert dims["order_total_dim"]["expr"] == (
        "case when order_total_usd > 100 then 'big' else 'small' end"
    )
    assert measures["order_total"]["expr"] == "order_total_usd"
    assert measures["order_count"]["expr"] == 1
    assert orders["defaults"]["agg_time_dimension"] == "ordered_at"  # a dimension's name
    assert [c["name"] for c in doc["models"][0]["columns"]] == [
        "order_total_usd",
        "order_placed_at",
    ]
    # another model's semantic model is not this rename's
    assert customers["measures"] == [{"name": "order_total", "agg": "sum"}]
    # the rest of the text is as the author wrote it
    assert "        description: The total amount for each order including taxes.\n" in out
    assert out.count("\n") == ORDERS.count("\n") + 1  # one line added: the measure's expr


STG = """\
models:
  - name: stg_orders
    data_tests:
      - dbt_utils.expression_is_true:
          arguments:
            expression: "order_total - tax_paid = subtotal"
    columns:
      - name: order_id
        data_tests:
          - not_null:
              config:
                where: "order_total > 0"
"""


def test_the_rename_reaches_a_test_expression_as_a_whole_name() -> None:
    out = follow_in_yaml(STG, "stg_orders", {"order_total": "order_total_usd",
                                             "subtotal": "subtotal_usd"})  # fmt: skip
    assert out == STG.replace("order_total - tax_paid = subtotal",
                              "order_total_usd - tax_paid = subtotal_usd").replace(
        "order_total > 0", "order_total_usd > 0")  # fmt: skip
    # `tax` is no whole name in the expression: nothing changes
    assert follow_in_yaml(STG, "stg_orders", {"tax": "vat"}) == STG


def test_a_relationships_field_naming_another_models_column_is_not_the_renamed_one() -> None:
    # jaffle-shop's orders.yml: orders.customer_id is tested against stg_customers.customer_id;
    # when customer_id of orders is renamed, that `field` still names stg_customers' column
    text = """\
models:
  - name: orders
    columns:
      - name: customer_id
        data_tests:
          - relationships:
              arguments:
                to: ref('stg_customers')
                field: customer_id
"""
    out = follow_in_yaml(text, "orders", {"customer_id": "buyer_id"})
    assert not isinstance(out, Refusal), out
    assert "      - name: buyer_id\n" in out and "field: customer_id\n" in out
    # a `field` of a test pointing back at the model itself is still a renamed name there
    own = text.replace("ref('stg_customers')", "ref('orders')")
    assert isinstance(follow_in_yaml(own, "orders", {"customer_id": "buyer_id"}), Refusal)

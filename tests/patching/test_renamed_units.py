"""A failed dbt test named after a column (or model) a candidate renames runs, and is judged,
under its new name; a test that merely disappeared is still not a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.dbt.units import DbtOutcome, judge_outcome
from patchit.patching.base import Edit, PatchCandidate
from patchit.patching.renamed_units import (
    _synthesised,
    candidate_renames,
    followed_event,
    followed_unit,
)

OLD = "test.shop.accepted_values_stg_orders_status__placed__returned.6d5f3a1b2c"
NEW = "test.shop.accepted_values_stg_orders_order_status__placed__returned"


def test_a_test_named_after_a_renamed_column_gets_the_new_name() -> None:
    follows = {"status": "order_status"}
    assert followed_unit(OLD, follows) == NEW
    assert followed_unit("model.shop.status", follows) == "model.shop.status"  # not a test
    assert followed_unit(OLD, {}) == OLD
    assert followed_unit(OLD, {"amount": "net"}) == OLD  # a name it does not hold
    # a model rename too: relationships_orders_customer_id__customer_id__ref_stg_customers_
    rel = "test.shop.relationships_orders_customer_id__customer_id__ref_stg_customers_.1"
    assert followed_unit(rel, {"stg_customers": "stg_crm_customers"}).endswith(
        "__ref_stg_crm_customers_"
    )


def test_a_singular_test_keeps_its_name() -> None:
    # named by its file, which the rename does not move (Saurabh-DS/datavault-dbt-duckdb-
    # medallion: the right candidate was judged on a test that did not exist, and refused)
    singular = "test.datavault.assert_claim_amount_within_vehicle_value"
    assert followed_unit(singular, {"claim_amount": "claim_amount_gbp"}) == singular
    hashed = f"{singular}.0123456789"  # a generic test whose node says it is none: kept too
    tests = {hashed: {"name": "assert_claim_amount_within_vehicle_value"}}
    assert followed_unit(hashed, {"claim_amount": "claim_amount_gbp"}, tests) == hashed


def test_the_event_and_its_related_units_follow() -> None:
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id=OLD,
        context={"related_units": [OLD.replace("accepted_values", "not_null")], "x": 1},
    )  # fmt: skip
    moved = followed_event(event, {"status": "order_status"})
    assert moved.unit_id == NEW and moved.context["x"] == 1
    assert moved.context["related_units"] == [NEW.replace("accepted_values", "not_null")]
    assert followed_event(event, {}) is event


def _ok(unique_id: str) -> dict[str, str]:
    return {"unique_id": unique_id, "status": "pass", "message": "", "resource_type": "test"}


def test_the_renamed_test_is_judged_by_its_name_not_its_hash() -> None:
    renamed = DbtOutcome(success=True, results=[_ok(f"{NEW}.99aa00bb11")])
    assert judge_outcome(renamed, NEW) == (True, [])
    # the old test is gone and nothing ran under the new name: not a pass
    other = DbtOutcome(success=True, results=[_ok("test.shop.unique_stg_orders_order_id.1")])
    assert judge_outcome(other, NEW) == (False, [NEW])
    # a model of the test's name is not the test
    model = {**_ok("model.shop.accepted_values_stg_orders_order_status__placed__returned")}
    assert judge_outcome(DbtOutcome(success=True, results=[model]), NEW) == (False, [NEW])


# -- a rename inside a generic test's arguments: the failing test's node, renamed ------------

MODEL = "{{ get_where_subquery(ref('orders')) }}"
EXPR_ID = "test.shop.dbt_utils_expression_is_true_orders_order_items_subtotal_subtotal.5e1f0c"
EXPR = {  # as dbt 1.11 writes the node in the manifest
    "name": "dbt_utils_expression_is_true_orders_order_items_subtotal_subtotal",
    "attached_node": "model.shop.orders",
    "test_metadata": {"name": "expression_is_true", "namespace": "dbt_utils",
                      "kwargs": {"expression": "order_items_subtotal = subtotal", "model": MODEL}},
}  # fmt: skip
VALUES_ID = "test.shop.accepted_values_customers_customer_type__new__returning.d12f0947c8"
VALUES = {
    "name": "accepted_values_customers_customer_type__new__returning",
    "attached_node": "model.shop.customers",
    "test_metadata": {"name": "accepted_values", "namespace": None, "kwargs": {
        "values": ["new", "returning"], "column_name": "customer_type", "model": MODEL}},
}  # fmt: skip


def test_a_rename_in_a_test_expression_renames_the_name_not_a_longer_one() -> None:
    tests = {EXPR_ID: EXPR, VALUES_ID: VALUES}
    follows = {"subtotal": "subtotal_usd"}
    # `order_items_subtotal` is another column: it keeps its name in the expression
    assert followed_unit(EXPR_ID, follows, tests) == (
        "test.shop.dbt_utils_expression_is_true_orders_order_items_subtotal_subtotal_usd"
    )
    assert followed_unit(VALUES_ID, {"customer_type": "customer_segment"}, tests) == (
        "test.shop.accepted_values_customers_customer_segment__new__returning"
    )
    # a test dbt did not name from its arguments (a custom `name:`): its name's words
    custom = {**EXPR, "name": "orders_subtotal_adds_up"}
    assert followed_unit("test.shop.orders_subtotal_adds_up.1", follows,
                         {"test.shop.orders_subtotal_adds_up.1": custom}) == (
        "test.shop.orders_subtotal_usd_adds_up")  # fmt: skip


def test_a_candidate_that_renames_in_yaml_without_declaring_it_is_followed(
    tmp_path: Path,
) -> None:
    """duckdb_rename_column renames `order_total` in the test's expression and declares no
    rename (jaffle-shop's stg_orders): the test is judged under its new name."""
    old_id = "test.shop.dbt_utils_expression_is_true_stg_orders_order_total_tax_paid_subtotal.bf"
    node = {
        "name": "dbt_utils_expression_is_true_stg_orders_order_total_tax_paid_subtotal",
        "attached_node": "model.shop.stg_orders",
        "test_metadata": {"name": "expression_is_true", "namespace": "dbt_utils", "kwargs": {
            "expression": "order_total - tax_paid = subtotal", "model": MODEL}},
    }  # fmt: skip
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"nodes": {old_id: node, "model.shop.stg_orders": {}}}))
    candidate = PatchCandidate(
        strategy="duckdb_rename_column", tag="rename_column", rationale="near name",
        edits=[Edit(path="models/staging/stg_orders.yml",
                    search="          expression: \"order_total - tax_paid = subtotal\"\n",
                    replace="          expression: \"order_total_usd - tax_paid = subtotal\"\n")],
    )  # fmt: skip
    assert candidate_renames(candidate) == {"order_total": "order_total_usd"}
    event = UniversalFailureEvent(source=FailureSource.DBT, pipeline_id="shop", unit_id=old_id,
                                  artifacts={"manifest": str(manifest)})  # fmt: skip
    moved = followed_event(event, candidate_renames(candidate))
    new = "test.shop.dbt_utils_expression_is_true_stg_orders_order_total_usd_tax_paid_subtotal"
    assert moved.unit_id == new
    assert judge_outcome(DbtOutcome(success=True, results=[_ok(f"{new}.0c1d")]), moved.unit_id)[0]
    # an edit that changes more than names tells no rename
    other = candidate.model_copy(
        update={
            "edits": [
                Edit(
                    path="models/staging/stg_orders.yml",
                    search="- unique\n",
                    replace="- not_null: {}\n",
                )
            ]
        }
    )
    assert candidate_renames(other) == {}


@pytest.mark.slow
def test_the_names_are_dbts_own() -> None:
    """The name synthesised here is the one dbt synthesises (its own function, imported)."""
    from dbt.parser.generic_test_builders import synthesize_generic_test_names

    cases = [
        ("dbt_utils_expression_is_true", "orders", EXPR["test_metadata"]["kwargs"]),  # type: ignore[index]
        ("accepted_values", "customers", VALUES["test_metadata"]["kwargs"]),  # type: ignore[index]
        ("relationships", "orders", {"column_name": "customer_id", "field": "customer_id",
                                      "to": "ref('stg_customers')", "model": MODEL}),
        ("dbt_utils_accepted_range", "orders", {"column_name": "x", "min_value": 0,
                                                 "inclusive": True, "model": MODEL}),
    ]  # fmt: skip
    for test_type, target, kwargs in cases:
        assert (
            _synthesised(test_type, target, kwargs)
            == synthesize_generic_test_names(test_type, target, kwargs)[1]
        )

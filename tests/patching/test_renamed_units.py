"""A failed dbt test named after a column (or model) a candidate renames runs, and is judged,
under its new name; a test that merely disappeared is still not a pass."""

from __future__ import annotations

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.dbt.units import DbtOutcome, judge_outcome
from patchit.patching.renamed_units import followed_event, followed_unit

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

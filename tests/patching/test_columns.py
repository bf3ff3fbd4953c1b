"""Column renames from real DuckDB binder errors (dbt 1.11, duckdb 2.0)."""

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence, Relation
from patchit.patching.base import Strategy
from patchit.patching.fixits.columns import RenameColumnStrategy
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import Broken, build_with, make_evidence, upstream_of


def _node_evidence(broken: Broken, model: str, path: str) -> Evidence:
    return make_evidence(
        broken.project,
        broken.node_messages[f"model.shop.{model}"],
        unit_id=f"model.shop.{model}",
        unit_path=path,
        error_type="Runtime Error",
        upstream=upstream_of(broken.project, path),
    )


@pytest.fixture
def strategy() -> Strategy:
    return RenameColumnStrategy()


@pytest.fixture
def evidence(staging_broken: Broken) -> Evidence:
    return _node_evidence(staging_broken, "stg_customers", "models/staging/stg_customers.sql")


@pytest.fixture
def qualified_evidence(staging_broken: Broken) -> Evidence:
    return _node_evidence(staging_broken, "stg_orders", "models/staging/stg_orders.sql")


@pytest.fixture
def values_list_evidence(orders_broken: Broken) -> Evidence:
    return _node_evidence(orders_broken, "orders", "models/marts/orders.sql")


@pytest.fixture
def unrelated_evidence(staging_broken: Broken) -> Evidence:
    return _node_evidence(staging_broken, "stg_payments", "models/staging/stg_payments.sql")


class TestRenameColumnContract(StrategyContract):
    pass


def test_messages_are_the_ones_duckdb_really_gives(
    evidence: Evidence, qualified_evidence: Evidence, values_list_evidence: Evidence
) -> None:
    assert 'Referenced column "frist_name" not found in FROM clause!' in evidence.error
    assert 'Candidate bindings: "first_name", "last_name"' in evidence.error
    assert 'Table "r" does not have a column named "stauts"' in qualified_evidence.error
    assert 'Candidate bindings: : "status"' in qualified_evidence.error
    assert 'Values list "o" does not have a column named "stauts"' in values_list_evidence.error
    assert "Candidate" not in values_list_evidence.error


def test_unqualified_typo_is_renamed(evidence: Evidence) -> None:
    (candidate,) = RenameColumnStrategy().fix(evidence, [])
    (edit,) = candidate.edits
    assert (edit.path, edit.search, edit.replace) == (
        "models/staging/stg_customers.sql",
        "    frist_name,\n",
        "    first_name,\n",
    )


def test_qualified_typo_keeps_its_qualifier(qualified_evidence: Evidence) -> None:
    (candidate,) = RenameColumnStrategy().fix(qualified_evidence, [])
    assert candidate.edits[0].replace == "    r.status\n"


def test_values_list_variant_uses_the_aliased_upstream_columns(
    values_list_evidence: Evidence,
) -> None:
    (candidate,) = RenameColumnStrategy().fix(values_list_evidence, [])
    assert candidate.edits[0].replace == "    o.status,\n"


@pytest.mark.slow
def test_renamed_models_build(
    evidence: Evidence, qualified_evidence: Evidence, values_list_evidence: Evidence, tmp_path: Path
) -> None:
    strategy = RenameColumnStrategy()
    staging = strategy.fix(evidence, []) + strategy.fix(qualified_evidence, [])
    merged = staging[0].model_copy(update={"edits": staging[0].edits + staging[1].edits})
    code, out = build_with(evidence, merged, tmp_path / "staging", "stg_customers stg_orders")
    assert code == 0, out
    fixed = strategy.fix(values_list_evidence, [])[0]
    code, out = build_with(values_list_evidence, fixed, tmp_path / "orders", "orders")
    assert code == 0, out


def test_two_equally_near_columns_give_no_candidate(values_list_evidence: Evidence) -> None:
    tied = values_list_evidence.model_copy(
        update={"upstream": [Relation(name="stg_orders", columns=["status", "STATUS"])]}
    )
    assert RenameColumnStrategy().fix(tied, []) == []


def test_one_bare_name_on_two_tables_gives_no_candidate(evidence: Evidence) -> None:
    message = evidence.error.replace('"first_name", "last_name"', '"o.first_name", "c.first_name"')
    tied = evidence.model_copy(update={"error": message, "upstream": []})
    assert RenameColumnStrategy().fix(tied, []) == []


def test_no_near_column_gives_no_candidate(values_list_evidence: Evidence) -> None:
    far = values_list_evidence.model_copy(
        update={"upstream": [Relation(name="stg_orders", columns=["order_id", "customer_id"])]}
    )
    assert RenameColumnStrategy().fix(far, []) == []

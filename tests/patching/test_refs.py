"""ref()/source() to missing nodes and self-referencing models, from real dbt 1.11 failures."""

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.base import Strategy
from patchit.patching.fixits.refs import FixRefStrategy, SelfRefCycleStrategy
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import Broken, build_with, copy_project, make_evidence


def _parse_evidence(project: Path, message: str, unit: str) -> Evidence:
    # a parse failure: no manifest, no unit_path; the strategy reads the path in the message
    return make_evidence(
        project,
        message,
        unit_id=f"model.shop.{unit}",
        unit_path=None,
        error_type="Compilation Error",
        status="parse_error",
    )


@pytest.fixture
def ref_evidence(ref_broken: Broken) -> Evidence:
    return _parse_evidence(ref_broken.project, ref_broken.parse_error(), "orders")


@pytest.fixture
def source_evidence(source_broken: Broken) -> Evidence:
    return _parse_evidence(source_broken.project, source_broken.parse_error(), "stg_orders")


@pytest.fixture
def cycle_evidence(cycle_broken: Broken) -> Evidence:
    return _parse_evidence(cycle_broken.project, cycle_broken.parse_error(), "customer_orders")


class TestFixRefContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FixRefStrategy()

    @pytest.fixture
    def evidence(self, ref_evidence: Evidence) -> Evidence:
        return ref_evidence

    @pytest.fixture
    def unrelated_evidence(self, cycle_evidence: Evidence) -> Evidence:
        return cycle_evidence


class TestSelfRefCycleContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return SelfRefCycleStrategy()

    @pytest.fixture
    def evidence(self, cycle_evidence: Evidence) -> Evidence:
        return cycle_evidence

    @pytest.fixture
    def unrelated_evidence(self, ref_evidence: Evidence) -> Evidence:
        return ref_evidence


def test_messages_are_the_ones_dbt_really_gives(
    ref_evidence: Evidence, source_evidence: Evidence, cycle_evidence: Evidence
) -> None:
    assert ref_evidence.error == (
        "Compilation Error\n  Model 'model.shop.orders' (models/marts/orders.sql) depends on a "
        "node named 'stg_order' which was not found"
    )
    assert source_evidence.error.endswith(
        "(models/staging/stg_orders.sql) depends on a source named 'raw.raw_order' which was "
        "not found"
    )
    assert cycle_evidence.error == "Found a cycle: model.shop.customer_orders"


def test_missing_ref_points_at_the_near_model(ref_evidence: Evidence) -> None:
    (candidate,) = FixRefStrategy().fix(ref_evidence, [])
    (edit,) = candidate.edits
    assert edit.path == "models/marts/orders.sql"
    assert "ref('stg_order')" in edit.search
    assert edit.replace == edit.search.replace("ref('stg_order')", "ref('stg_orders')")


def test_missing_source_points_at_the_near_table(source_evidence: Evidence) -> None:
    (candidate,) = FixRefStrategy().fix(source_evidence, [])
    assert "source('raw', 'raw_orders')" in candidate.edits[0].replace


def test_self_ref_points_at_the_near_upstream_model(cycle_evidence: Evidence) -> None:
    (candidate,) = SelfRefCycleStrategy().fix(cycle_evidence, [])
    assert candidate.tag == "fix_ref"
    assert "ref('customers')" in candidate.edits[0].replace


@pytest.mark.slow
def test_fixed_refs_build(
    ref_evidence: Evidence, source_evidence: Evidence, cycle_evidence: Evidence, tmp_path: Path
) -> None:
    for evidence, strategy, node in [
        (ref_evidence, FixRefStrategy(), "orders"),
        (source_evidence, FixRefStrategy(), "stg_orders"),
        (cycle_evidence, SelfRefCycleStrategy(), "customer_orders"),
    ]:
        candidate = strategy.fix(evidence, [])[0]
        code, out = build_with(evidence, candidate, tmp_path / node, node)
        assert code == 0, out


def test_two_equally_near_nodes_give_no_candidate(ref_broken: Broken, tmp_path: Path) -> None:
    project = copy_project(ref_broken.project, tmp_path / "shop")
    (project / "models/staging/stg_orderz.sql").write_text("select 1 as order_id\n")
    evidence = _parse_evidence(project, ref_broken.parse_error(), "orders")
    assert FixRefStrategy().fix(evidence, []) == []


def test_no_near_node_gives_no_candidate(ref_broken: Broken, tmp_path: Path) -> None:
    project = copy_project(ref_broken.project, tmp_path / "shop")
    staging = project / "models/staging"
    (staging / "stg_orders.sql").rename(staging / "stg_sales.sql")
    evidence = _parse_evidence(project, ref_broken.parse_error(), "orders")
    assert FixRefStrategy().fix(evidence, []) == []


def test_self_ref_with_tied_names_gives_no_candidate(ref_broken: Broken, tmp_path: Path) -> None:
    # orders refs itself: stg_orders and the seed raw_orders are equally near
    project = copy_project(ref_broken.project, tmp_path / "shop")
    orders = project / "models/marts/orders.sql"
    orders.write_text(orders.read_text().replace("ref('stg_order')", "ref('orders')"))
    evidence = _parse_evidence(project, "Found a cycle: model.shop.orders", "orders")
    assert SelfRefCycleStrategy().fix(evidence, []) == []


def test_self_ref_never_points_downstream(ref_broken: Broken, tmp_path: Path) -> None:
    # stg_orders refs itself; "orders" is the nearest name but is built from stg_orders
    project = copy_project(ref_broken.project, tmp_path / "shop")
    stg = project / "models/staging/stg_orders.sql"
    stg.write_text(stg.read_text().replace("ref('raw_orders')", "ref('stg_orders')"))
    orders = project / "models/marts/orders.sql"
    orders.write_text(orders.read_text().replace("ref('stg_order')", "ref('stg_orders')"))
    evidence = _parse_evidence(project, "Found a cycle: model.shop.stg_orders", "stg_orders")
    assert SelfRefCycleStrategy().fix(evidence, []) == []

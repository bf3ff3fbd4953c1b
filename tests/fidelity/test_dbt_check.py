"""The data check on real dbt-duckdb: the shop project, real git history, the real harness."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.harnesses.dbt.harness import DbtHarness
from tests.conftest import commit_all, git
from tests.fidelity.dbt_cases import AMOUNT, ORDERS, Incident, commit_edit, edit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness() -> Iterator[DbtHarness]:
    """One warm dbt harness for the module, as for one incident's candidates."""
    with DbtHarness(warm=True) as dbt:
        yield dbt


def test_a_fix_reading_the_wrong_column_is_caught_and_the_right_one_is_same(
    shop_repo: Path, _patchit_home: Path, harness: DbtHarness
) -> None:
    good = git(shop_repo, "rev-parse", "HEAD")
    commit_edit(shop_repo, AMOUNT, "coalesce(p.amont, 0) as amount,", "orders: typo")
    incident = Incident(shop_repo, _patchit_home, harness, baseline_commit=good)

    # the obvious near column makes the run green, and every amount of a voucher order wrong
    wrong_run, wrong = incident.candidate("p.amont", "p.card_amount")
    assert wrong_run.passed
    assert wrong.status == "differs" and wrong.needs_review, wrong.summary
    assert wrong.baseline_commit == good and wrong.baseline_source == "last good commit (memory)"
    by_name = {o.name: o for o in wrong.outputs}
    orders = by_name["main.orders"]
    assert orders.verdict == "unexpected" and orders.unexpected == ["amount"]
    assert orders.rows_baseline == orders.rows_candidate == 10
    assert "amount" in orders.sample and "baseline" in orders.sample
    assert "candidate" in orders.sample
    # downstream relations read the wrong amounts: unexpected too, never "propagated"
    assert by_name["main.customers"].verdict == "unexpected"
    assert wrong.meant_to_differ == {}  # the breaking diff only broke the line the fix repaired
    assert "NEEDS REVIEW" in wrong.summary and "main.orders (amount)" in wrong.summary
    report = wrong.markdown()
    assert "needs review" in report and "harness dbt" in report and "main.orders" in report
    assert wrong.baseline_runs == 2  # differences asked for a second baseline run

    right_run, right = incident.candidate("p.amont", "p.amount")
    assert right.status == "same" and not right.needs_review, right.summary
    assert right.summary.startswith(f"same as baseline {good[:12]}")
    assert {o.name for o in right.outputs} >= {"main.orders", "main.customers"}
    assert f"harness dbt, isolation {right_run.isolation}, data check: same" in right.fidelity()


def test_a_change_the_breaking_commit_meant_is_not_flagged(
    shop_repo: Path, _patchit_home: Path, harness: DbtHarness
) -> None:
    edit(shop_repo, AMOUNT, "coalesce(p.amount, 0) * 100 as amount,")  # cents, on purpose
    edit(shop_repo, "o.order_date,", "o.order_dat,")  # ... and a typo
    commit_all(shop_repo, "orders: amounts in cents")
    incident = Incident(shop_repo, _patchit_home, harness)  # nothing in memory: the parent

    _, check = incident.candidate("o.order_dat,", "o.order_date,")
    assert check.status == "differs" and not check.needs_review, check.summary
    assert check.baseline_source == "parent of the failing commit"
    assert check.meant_to_differ["main.orders"] == ["amount"]
    verdicts = {o.name: o.verdict for o in check.outputs}
    assert verdicts["main.orders"] == "meant"
    # downstream of the meant change, with unchanged SQL: their differences follow from it
    assert verdicts["main.customers"] == "propagated"
    assert verdicts["main.daily_revenue"] == "propagated"
    assert "only where the breaking change meant: main.orders (amount)" in check.summary

    # the same intended change with a fix that also reads the wrong column is still caught
    _, wrong = incident.candidate("o.order_dat,", "o.order_date,\n    p.card_amount as amount_x,")
    assert wrong.needs_review
    assert {o.name: o.verdict for o in wrong.outputs}["main.orders"] == "unexpected"


def test_no_baseline_for_a_first_commit(
    tmp_path: Path, built_shop: Path, _patchit_home: Path, harness: DbtHarness
) -> None:
    repo = tmp_path / "fresh"
    shutil.copytree(built_shop, repo)
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb\n*.duckdb.wal\n")
    edit(repo, AMOUNT, "coalesce(p.amont, 0) as amount,")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop: first commit, already broken")
    incident = Incident(repo, _patchit_home, harness)

    result, check = incident.candidate("p.amont", "p.amount")
    assert result.passed
    assert check.status == "no_baseline" and not check.needs_review
    assert check.summary == (
        "no good baseline, outputs not compared: "
        f"the failing commit {incident.event.commit[:12]} has no parent"  # type: ignore[index]
    )
    assert check.outputs == [] and "no good baseline" in check.fidelity()


def test_columns_that_differ_between_two_baseline_runs_are_excluded(
    shop_repo: Path, _patchit_home: Path, harness: DbtHarness
) -> None:
    edit(shop_repo, "o.status,", "o.status,\n    current_timestamp as loaded_at,")
    commit_all(shop_repo, "orders: load time")
    commit_edit(shop_repo, AMOUNT, "coalesce(p.amont, 0) as amount,", "orders: typo")
    incident = Incident(shop_repo, _patchit_home, harness)

    _, check = incident.candidate("p.amont", "p.amount")
    assert check.status == "same" and not check.needs_review, check.summary
    assert check.unstable_excluded == {"main.orders": ["loaded_at"]}
    orders = {o.name: o for o in check.outputs}["main.orders"]
    assert orders.verdict == "unstable" and orders.unstable == ["loaded_at"]
    assert "unstable values excluded" in check.summary
    assert check.baseline_runs == 2
    # the user's checkout is untouched
    assert "p.amont" in (shop_repo / ORDERS).read_text()
    assert git(shop_repo, "status", "--porcelain") == ""

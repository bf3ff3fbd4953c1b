"""Fingerprints of real dbt failures, run twice in two checkouts with line drift."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.memory import cause_key, error_fingerprint
from tests.conftest import run_dbt


def failing_checkout(built_shop: Path, dest: Path, revenue_col: str, customers_col: str) -> Path:
    """A copy of the built project where two marts read a column `orders` does not have."""
    shutil.copytree(built_shop, dest)
    revenue = dest / "models/marts/daily_revenue.sql"
    revenue.write_text(revenue.read_text().replace("order_date", revenue_col))
    customers = dest / "models/marts/customers.sql"
    customers.write_text(customers.read_text().replace("min(order_date)", f"min({customers_col})"))
    return dest


def failed_events(project: Path) -> dict[str, UniversalFailureEvent]:
    res = run_dbt(project, "run", "--select", "daily_revenue", "customers")
    assert res.returncode == 1, res.stdout[-2000:]
    results = json.loads((project / "target/run_results.json").read_text())
    events = {}
    for result in results["results"]:
        if result["status"] != "error":
            continue
        kind = re.search(r"^\s*(\w+ Error):", result["message"], re.MULTILINE)
        name = result["unique_id"].rsplit(".", 1)[-1]
        events[name] = UniversalFailureEvent(
            source=FailureSource.DBT,
            pipeline_id="shop",
            run_id=results["metadata"]["invocation_id"],
            unit_id=result["unique_id"],
            unit_path=f"models/marts/{name}.sql",
            error_type=kind.group(1) if kind else "",
            error_message=result["message"],
            repo_path=str(project),
            dbt=DbtInvocation(command="run", project_dir=str(project), cwd=str(project)),
        )
    return events


@pytest.mark.slow
def test_real_dbt_failures_fingerprint_stably(built_shop: Path, tmp_path: Path) -> None:
    first = failed_events(failing_checkout(built_shop, tmp_path / "a/shop", "order_dt", "order_dt"))
    second_dir = failing_checkout(built_shop, tmp_path / "b/shop", "order_dt", "order_dx")
    revenue = second_dir / "models/marts/daily_revenue.sql"
    revenue.write_text("-- drift\n-- more drift\n" + revenue.read_text())
    second = failed_events(second_dir)

    assert set(first) == set(second) == {"daily_revenue", "customers"}
    assert first["daily_revenue"].error_message != second["daily_revenue"].error_message
    assert first["daily_revenue"].run_id != second["daily_revenue"].run_id
    # same node, same error, other checkout, other invocation, other line numbers
    assert error_fingerprint(first["daily_revenue"]) == error_fingerprint(second["daily_revenue"])
    # two nodes of one invocation failing on the same missing column: one cause
    assert error_fingerprint(first["daily_revenue"]) != error_fingerprint(first["customers"])
    assert cause_key(first["daily_revenue"]) == cause_key(first["customers"])
    # another missing column is another failure and another cause
    assert error_fingerprint(first["customers"]) != error_fingerprint(second["customers"])
    assert cause_key(first["customers"]) != cause_key(second["customers"])

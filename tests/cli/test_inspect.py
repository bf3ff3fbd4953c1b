"""`patchit inspect ID`: the fix checked out in a worktree of its own, re-run there on a fresh
copy of the warehouse and compared with the last good outputs; the user's checkout and database
untouched. Real dbt, git and SQLite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt, user_state
from tests.cli.test_dbt_wrapper import break_column
from tests.conftest import git


@pytest.mark.slow
def test_inspect_re_runs_the_fix_beside_the_users_checkout(shop_repo: Path) -> None:
    break_column(shop_repo)
    res = patchit_dbt(shop_repo, "build")
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    assert f"patchit inspect {incident['id']}" in res.stderr + res.stdout  # pointed to
    before = user_state(shop_repo)

    res = patchit("inspect", incident["id"])

    assert res.returncode == 0, res.stdout + res.stderr
    where = Path(os.environ["PATCHIT_HOME"]) / "inspect" / incident["id"]
    assert f"worktree: {where} (on {incident['branch']})" in res.stdout
    assert "re-run: dbt build" in res.stdout and ": passed" in res.stdout
    assert "data check:" in res.stdout and "daily_revenue" in res.stdout
    assert f"warehouse copy (query it freely): {where / 'shop.duckdb'}" in res.stdout
    assert git(where, "branch", "--show-current") == incident["branch"]
    assert "sum(amount) as revenue" in (where / "models/marts/daily_revenue.sql").read_text()
    assert user_state(shop_repo) == {**before, "n_worktrees": "2", "worktrees": before["worktrees"]}

    again = patchit("inspect", incident["id"], "--no-run")  # reused, not re-created
    assert again.returncode == 0 and f"worktree: {where}" in again.stdout
    assert "re-run:" not in again.stdout

    cleaned = patchit("inspect", incident["id"], "--clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not where.exists() and str(where) not in git(shop_repo, "worktree", "list")
    assert user_state(shop_repo) == before | {"n_worktrees": "1"}


def test_inspect_refuses_an_unknown_incident_in_one_line() -> None:
    res = patchit("inspect", "20000101-000000")
    assert res.returncode == 2
    assert "20000101-000000" in res.stderr and "Traceback" not in res.stderr

"""`patchit heal EVENT.json`: exit 0 fixed, 1 not fixed, 2 bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.memory import Memory
from tests.cli.helpers import incidents, patchit, patchit_dbt
from tests.conftest import commit_all, git

pytestmark = pytest.mark.slow


def recorded_event(home: Path, dest: Path) -> Path:
    [incident] = Memory.open(home).list_incidents()
    [event] = Memory.open(home).events_for(incident.id)
    dest.write_text(event.model_dump_json(indent=2))
    return dest


def test_heal_event_file_fixes_and_exits_0(
    shop_repo: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    model = shop_repo / "models" / "staging" / "stg_customers.sql"
    model.write_text(model.read_text().replace("    first_name,", "    frist_name,"))
    commit_all(shop_repo, "stg_customers: tidy")
    assert patchit_dbt(shop_repo, "build", extra=("--no-heal",)).returncode == 1
    event_file = recorded_event(_patchit_home, tmp_path / "event.json")
    # the user moves on meanwhile (another branch, a new commit on the same file):
    # evidence and the fix still come from the failing commit
    failing = git(shop_repo, "rev-parse", "HEAD")
    git(shop_repo, "switch", "-q", "-c", "feature")
    model.write_text("-- customers, one row each\n" + model.read_text())
    commit_all(shop_repo, "stg_customers: document")
    res = patchit("heal", str(event_file))
    assert res.returncode == 0, res.stderr
    [incident] = incidents()
    assert incident["status"] == "fixed"
    fixed = git(shop_repo, "show", f"{incident['branch']}:models/staging/stg_customers.sql")
    assert "first_name," in fixed and "one row each" not in fixed
    assert git(shop_repo, "rev-parse", f"{incident['branch']}~1") == failing
    assert git(shop_repo, "worktree", "list").count("\n") == 0
    assert git(shop_repo, "branch", "--show-current") == "feature"


def test_heal_event_file_not_fixed_exits_1(
    shop_repo: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    seed = shop_repo / "seeds" / "raw_orders.csv"
    seed.write_text(seed.read_text() + "110,2,2024-03-16,lost\n")
    commit_all(shop_repo, "orders: new load")
    assert patchit_dbt(shop_repo, "build", extra=("--no-heal",)).returncode == 1
    event_file = recorded_event(_patchit_home, tmp_path / "event.json")
    res = patchit("heal", str(event_file))
    assert res.returncode == 1
    [incident] = incidents()
    assert (incident["status"], incident["classification"]) == ("escalated", "data_issue")


def test_truncated_manifest_named_by_event_is_bad_input(shop_repo: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"nodes": {')
    event = {
        "source": "dbt",
        "pipeline_id": "shop",
        "unit_id": "model.shop.orders",
        "repo_path": str(shop_repo),
        "commit": git(shop_repo, "rev-parse", "HEAD"),
        "artifacts": {"manifest": str(manifest)},
        "dbt": {"command": "build", "project_dir": str(shop_repo), "cwd": str(shop_repo)},
    }
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(event))
    res = patchit("heal", str(event_file))
    assert res.returncode == 2
    assert str(manifest) in res.stderr and "not valid JSON: truncated" in res.stderr
    assert incidents() == []


def test_missing_dbt_is_a_clear_error(shop_repo: Path, tmp_path: Path) -> None:
    # a `dbt` package without its CLI stands in for an environment where dbt is not installed
    shadow = tmp_path / "shadow" / "dbt"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    import os
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "patchit", "dbt", "--project-dir", str(shop_repo), "--", "build"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(shadow.parent)},
    )
    assert res.returncode == 2
    assert "dbt: not installed" in res.stderr and "pip install" in res.stderr
    assert res.stdout == ""

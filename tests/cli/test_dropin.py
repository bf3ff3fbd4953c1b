"""`patchit dbt` as a drop-in for `dbt`: where it cannot heal, dbt runs unchanged and patchit
says why on stderr; dbt's artifacts record the user's own command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt
from tests.conftest import git

pytestmark = pytest.mark.slow


def test_outside_git_dbt_runs_unchanged(shop_repo: Path) -> None:
    shutil.rmtree(shop_repo / ".git")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 0, res.stderr  # dbt's own exit code: the shop builds green
    assert "Completed successfully" in res.stdout
    assert "not healing" in res.stderr and "not inside a git repository" in res.stderr
    assert "error" not in res.stderr.lower()


def test_outside_git_a_failure_keeps_dbt_exit_code(shop_repo: Path) -> None:
    shutil.rmtree(shop_repo / ".git")
    model = shop_repo / "models" / "marts" / "customers.sql"
    model.write_text(model.read_text().replace("select", "selct", 1))
    before = model.read_text()
    res = patchit_dbt(shop_repo, "build", "--select", "customers")
    assert res.returncode == 1, res.stderr
    assert "not inside a git repository" in res.stderr
    assert model.read_text() == before
    assert all(i["status"] == "open" for i in incidents())  # recorded, never healed


def test_repo_without_commit_runs_dbt(shop_repo: Path) -> None:
    shutil.rmtree(shop_repo / ".git")
    git(shop_repo, "init", "-q", "-b", "main")
    res = patchit_dbt(shop_repo, "build", "--select", "orders")
    assert res.returncode == 0, res.stderr
    assert "has no commit yet" in res.stderr


def test_run_results_record_the_users_invocation(shop_repo: Path) -> None:
    res = patchit_dbt(shop_repo, "build", "--select", "orders")
    assert res.returncode == 0, res.stderr
    results = json.loads((shop_repo / "target" / "run_results.json").read_text())
    command = results["args"]["invocation_command"]
    assert command == f"dbt build --select orders --profiles-dir {shop_repo}"
    assert "patchit" not in command and "dbt-run-" not in command


def test_dbt_args_without_double_dash(shop_repo: Path) -> None:
    res = patchit(
        "dbt", "--project-dir", str(shop_repo), "build", "--select", "orders",
        "--profiles-dir", str(shop_repo), cwd=shop_repo,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "1 of 1 OK" in res.stdout or "PASS=" in res.stdout

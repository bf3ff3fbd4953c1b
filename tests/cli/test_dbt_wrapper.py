"""`patchit dbt -- build` end to end: real dbt-duckdb, real git, real SQLite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt, user_state
from tests.conftest import BIN, commit_all, git

pytestmark = pytest.mark.slow


def break_column(repo: Path) -> None:
    model = repo / "models" / "marts" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("sum(amount) as revenue", "sum(amout) as revenue"))
    commit_all(repo, "daily_revenue: sum revenue per day")


def test_green_build_passes_through(shop_repo: Path) -> None:
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 0, res.stderr
    assert "Completed successfully" in res.stdout
    assert incidents() == []


def test_column_typo_is_healed_on_a_branch(shop_repo: Path, tmp_path: Path) -> None:
    break_column(shop_repo)
    broken = git(shop_repo, "rev-parse", "HEAD")
    # a twin of the user's repo where plain dbt runs the same failing build: the heal's one
    # run below answers both what it lands and that the user's state is plain dbt's
    twin = tmp_path / "twin"
    shutil.copytree(shop_repo, twin)
    subprocess.run(
        [str(BIN / "dbt"), "build", "--profiles-dir", str(twin)],
        cwd=twin,
        capture_output=True,
        text=True,
    )
    res = patchit_dbt(shop_repo, "build")
    after_plain = user_state(shop_repo)
    plain = user_state(twin)
    assert after_plain["head"] == plain["head"] and after_plain["branch"] == plain["branch"]
    assert after_plain["status"] == plain["status"]
    assert res.returncode == 1, res.stderr  # dbt's own exit code
    assert 'Referenced column "amout" not found' in res.stdout
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    assert incident["classification"] == "code_bug"
    branch = incident["branch"]
    assert branch == f"patchit/{incident['id']}"
    # one commit on top of the failing commit, only the model file, patchit's identity
    assert git(shop_repo, "rev-parse", f"{branch}~1") == broken
    files = git(shop_repo, "show", "--name-only", "--format=", branch).split()
    assert files == ["models/marts/daily_revenue.sql"]
    assert git(shop_repo, "log", "-1", "--format=%an", branch) == "patchit"
    assert "sum(amount) as revenue" in git(
        shop_repo, "show", f"{branch}:models/marts/daily_revenue.sql"
    )
    # the user's tree, branch, worktrees and database are as the failing run left them
    assert after_plain["branch"] == "main"
    assert after_plain["n_worktrees"] == "1"
    assert after_plain["head"] == broken
    assert git(shop_repo, "status", "--porcelain") == ""
    # the branch really builds: check it out in a fresh clone and run dbt from scratch
    clone = tmp_path / "clone"
    git(shop_repo, "clone", "-q", "--branch", branch, str(shop_repo), str(clone))
    build = subprocess.run(
        [str(BIN / "dbt"), "build", "--profiles-dir", str(clone)],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout[-2000:]
    report = patchit("report", incident["id"])
    assert report.returncode == 0
    assert "sum(amount) as revenue" in report.stdout and "FIXED" in report.stdout


def test_not_null_failure_is_escalated_as_data_issue(shop_repo: Path) -> None:
    seed = shop_repo / "seeds" / "raw_customers.csv"
    seed.write_text(seed.read_text() + "7,Frances,Allen,,2024-03-20\n")
    commit_all(shop_repo, "seeds: load March customers")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1
    [incident] = incidents()
    assert incident["status"] == "escalated"
    assert incident["classification"] == "data_issue"
    assert incident["branch"] is None and incident["attempts"] == 0
    report = Path(incident["report_md"]).read_text()
    assert Path(incident["report_json"]).is_file()
    assert "Rows the test found" in report and "| email |" in report  # sampled from a copy
    assert "seeds/raw_customers.csv" in report  # what changed since the last good run
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    # the next scheduled run attaches to the same incident instead of opening another
    again = patchit_dbt(shop_repo, "build")
    assert again.returncode == 1
    [same] = incidents()
    assert same["id"] == incident["id"] and same["events"] == 2 and same["attempts"] == 0
    assert "recurrence" in again.stderr


def test_parse_error_uses_the_structured_error_not_stale_run_results(shop_repo: Path) -> None:
    # a green run leaves target/run_results.json (all green) behind
    assert patchit_dbt(shop_repo, "build").returncode == 0
    model = shop_repo / "models" / "marts" / "orders.sql"
    model.write_text(model.read_text().replace("ref('stg_orders')", "ref('stg_order')"))
    commit_all(shop_repo, "orders: read staged orders")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 2  # dbt failed before running any node
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    branch = incident["branch"]
    assert "ref('stg_orders')" in git(shop_repo, "show", f"{branch}:models/marts/orders.sql")


def test_a_committed_break_under_uncommitted_work_is_healed_on_its_snapshot(
    shop_repo: Path,
) -> None:
    # a green full build on a clean tree records the last good commit: the breaking change is
    # measured from it, through the commit and the uncommitted work (without it, HEAD is
    # taken as good, and only the work's own diff is read)
    assert patchit_dbt(shop_repo, "build").returncode == 0
    break_column(shop_repo)
    broken = git(shop_repo, "rev-parse", "HEAD")
    (shop_repo / "seeds" / "raw_orders.csv").write_text(
        (shop_repo / "seeds" / "raw_orders.csv").read_text() + "110,2,2024-03-16,placed\n"
    )
    before = git(shop_repo, "status", "--porcelain"), (shop_repo / ".git/index").read_bytes()
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1
    assert "healing uncommitted work on" in res.stderr and "not healing" not in res.stderr
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    snapshot = incident["uncommitted"]["snapshot"]
    assert incident["uncommitted"]["files"] == ["seeds/raw_orders.csv"]
    # the fix sits on the snapshot of the work, which sits on the broken commit
    assert git(shop_repo, "rev-parse", f"{incident['branch']}~1") == snapshot
    assert git(shop_repo, "rev-parse", f"{snapshot}~1") == broken
    assert "110,2,2024-03-16" in git(
        shop_repo, "show", f"{incident['branch']}:seeds/raw_orders.csv"
    )
    after = git(shop_repo, "status", "--porcelain"), (shop_repo / ".git/index").read_bytes()
    assert after == before


def test_no_heal_only_records(shop_repo: Path) -> None:
    break_column(shop_repo)
    res = patchit_dbt(shop_repo, "build", extra=("--no-heal",))
    assert res.returncode == 1
    assert "--no-heal" in res.stderr
    [incident] = incidents()
    assert incident["status"] == "open"


def test_secret_vars_reach_the_sandbox_but_are_never_stored(
    shop_repo: Path, _patchit_home: Path
) -> None:
    # the model needs the secret var: a sandbox run without the verbatim --vars would fail
    model = shop_repo / "models" / "marts" / "daily_revenue.sql"
    guard = (
        '{% if var("db_password") | length != 7 %}'
        '{{ exceptions.raise_compiler_error("db_password var is wrong") }}{% endif %}\n'
    )
    model.write_text(guard + model.read_text())
    commit_all(shop_repo, "daily_revenue: guarded")
    break_column(shop_repo)
    res = patchit_dbt(shop_repo, "build", "--vars", "{db_password: hunter2, day: '2024-03-01'}")
    assert res.returncode == 1
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    # what patchit stores and shows (dbt's own parse cache holds rendered vars, as in target/)
    for path in [*(_patchit_home / "memory").rglob("*"), *(_patchit_home / "reports").rglob("*")]:
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path
    assert "hunter2" not in res.stderr

"""`patchit airflow check [--changed-only]`: a DAG file the change broke with an Airflow 2
idiom is imported as the DAG processor would, healed on a verified branch, and the exit code
says it still fails here; a broken file the change did not touch is left out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit
from tests.conftest import commit_all, git
from tests.test_loop_airflow3 import SCHEDULE_INTERVAL_DAG

# "airflow" and "dag" in the text: the DAG processor's safe mode skips files without them
LEGACY = "from airflow.sdk import dag  # noqa\nimport patchit_no_such_module  # noqa\n"


def dag_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "legacy.py").write_text(LEGACY)  # broken before the change: not its doing
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    (repo / "dags" / "nightly.py").write_text(SCHEDULE_INTERVAL_DAG)
    commit_all(repo, "nightly: port from Airflow 2")
    return repo


@pytest.mark.slow
def test_the_changed_dag_file_is_healed_and_the_untouched_one_left_out(
    tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    for name in [k for k in os.environ if k.startswith("GITHUB_")]:
        monkeypatch.delenv(name)
    repo = dag_repo(tmp_path)
    res = patchit("airflow", "check", "--dags-folder", str(repo / "dags"), "--changed-only")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    assert "1 DAG file(s) that fail to import were not changed" in res.stderr
    assert "1 DAG file(s) fail to import" in res.stdout
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr[-3000:]
    fixed = git(repo, "show", f"{incident['branch']}:dags/nightly.py")
    assert fixed == SCHEDULE_INTERVAL_DAG.replace("schedule_interval=", "schedule=").strip()
    assert git(repo, "status", "--porcelain") == ""


def test_bad_input_is_one_line(tmp_path: Path, _patchit_home: Path) -> None:
    res = patchit("airflow", "check", "--dags-folder", str(tmp_path / "none"))
    assert res.returncode == 2 and "no DAG folder there" in res.stderr
    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "a.py").write_text("x = 1\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    res = patchit("airflow", "check", "--dags-folder", str(repo / "dags"), "--changed-only",
                  "--base", "no-such-rev")  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"patchit: error: --base no-such-rev: no such commit in {repo.resolve()}; fetch it "
        "(actions/checkout `fetch-depth: 0`)"
    ]

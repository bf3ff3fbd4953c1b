"""The breaking change's diff for the evidence, from a real git repository (read-only)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.gitlog import breaking_diff, breaking_diff_or_note
from tests.conftest import EXAMPLE, commit_all, git

SECRET = "hunter2-but-longer"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "a.sql").write_text("select 1 as id,\n    name\nfrom t\n")
    (repo / "models" / "b.sql").write_text("select 2 as id\n")
    (repo / "profiles.yml").write_text("password: old\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "initial")
    return repo


def test_diff_of_the_failing_commit_against_its_parent(repo: Path) -> None:
    (repo / "models" / "a.sql").write_text("select 1 as id,\n    nme\nfrom t\n")
    head = commit_all(repo, "a: typo")
    diff = breaking_diff(repo, None, head)
    assert diff.startswith("diff --git a/models/a.sql b/models/a.sql")
    assert "-    name\n+    nme\n" in diff
    assert "b.sql" not in diff


def test_since_the_last_good_commit_failure_files_first(repo: Path) -> None:
    good = git(repo, "rev-parse", "HEAD")
    (repo / "models" / "a.sql").write_text("select 1 as id,\n    nme\nfrom t\n")
    commit_all(repo, "a")
    (repo / "models" / "b.sql").write_text("select 3 as id\n")
    (repo / "profiles.yml").write_text("password: new-secret-value\n")
    head = commit_all(repo, "b and profile")
    diff = breaking_diff(repo, good, head, first=["models/b.sql"])
    assert diff.index("models/b.sql") < diff.index("models/a.sql")
    assert "profiles.yml\n(not shown: the file may hold secrets)" in diff
    assert "new-secret-value" not in diff


def test_the_size_cap_cuts_and_names_what_is_left_out(repo: Path) -> None:
    (repo / "models" / "a.sql").write_text("".join(f"select {i} as c{i}\n" for i in range(200)))
    (repo / "models" / "b.sql").write_text("select 4 as id\n")
    head = commit_all(repo, "big")
    diff = breaking_diff(repo, None, head, first=["models/a.sql"], max_chars=1_000)
    assert len(diff) < 1_200
    assert "[... diff of this file cut]" in diff
    assert diff.rstrip().endswith("[... size cap: diff of models/b.sql not shown]")


def test_a_root_commit_and_an_unknown_base(repo: Path) -> None:
    assert "+select 2 as id" in breaking_diff(repo, None, "HEAD")
    notes: list[str] = []
    assert breaking_diff_or_note(repo, "no-such-rev", "HEAD", [], notes) == ""
    assert notes and notes[0].startswith("breaking diff unavailable:")


def test_gatherers_fill_it_redacted(tmp_path: Path) -> None:
    """Both evidence gatherers put the breaking diff first-class on the evidence, redacted."""
    repo = tmp_path / "shop"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (repo / "dags").mkdir()
    (repo / "dags" / "load.py").write_text("def load():\n    return 1\n")
    git(repo, "init", "-q", "-b", "main")
    good = commit_all(repo, "initial")
    orders = repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("o.status,", f"o.statsu,  -- password={SECRET}"))
    (repo / "dags" / "load.py").write_text("def load():\n    return missing_name\n")
    head = commit_all(repo, "orders and load")
    common = {"repo_path": str(repo), "commit": head, "error_message": "boom"}
    dbt_event = UniversalFailureEvent.model_validate(
        {
            "source": "dbt",
            "pipeline_id": "shop",
            "unit_id": "model.shop.orders",
            "unit_path": "models/marts/orders.sql",
            **common,
        }
    )
    dbt_ev = gather_dbt_evidence(dbt_event, repo, last_good_commit=good)
    assert dbt_ev.breaking_diff.startswith("diff --git a/models/marts/orders.sql")
    assert "+    o.statsu,  -- password=" in dbt_ev.breaking_diff
    assert "dags/load.py" in dbt_ev.breaking_diff and SECRET not in dbt_ev.breaking_diff
    airflow_event = UniversalFailureEvent.model_validate(
        {"source": "airflow", "pipeline_id": "load", "unit_id": "load", **common}
        | {"unit_path": "dags/load.py"}
    )
    airflow_ev = gather_airflow_evidence(airflow_event, repo)
    assert airflow_ev.breaking_diff.startswith("diff --git a/dags/load.py")
    assert "+    return missing_name" in airflow_ev.breaking_diff
    assert SECRET not in airflow_ev.breaking_diff

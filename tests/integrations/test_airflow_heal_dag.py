"""The heal DAG as Airflow sees it, and `PatchitNotifier(heal="dag")` inside real Airflow 3
(`airflow dags test`) triggering it on a local server that speaks the trigger endpoint."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import commit_all, git
from tests.fake_airflow import FakeAirflow, serve
from tests.integrations.test_airflow_real import (
    AIRFLOW,
    DAG,
    airflow_env,
    migrated_airflow_home,
)

__all__ = ["migrated_airflow_home"]  # the fixture, used here
pytestmark = pytest.mark.slow


def test_the_shipped_heal_dag() -> None:
    from patchit.integrations.airflow_heal import dag, make_heal_dag

    assert dag.dag_id == "patchit_heal" and dag.schedule is None
    assert (dag.max_active_runs, dag.max_active_tasks) == (1, 1)
    assert dag.is_paused_upon_creation is False and dag.catchup is False
    assert dag.tags == {"patchit-heal"}
    [heal] = dag.tasks
    assert (heal.task_id, heal.retries, heal.pool) == ("heal", 0, "default_pool")
    assert heal.execution_timeout == timedelta(hours=2)
    mine = make_heal_dag("heal_ours", max_active_runs=3, pool="patchit")
    assert (mine.dag_id, mine.max_active_runs, mine.tasks[0].pool) == ("heal_ours", 3, "patchit")
    assert mine.tags == {"patchit-heal"}  # the callback's recursion guard knows it by the tag


def test_patchit_notifier_triggers_the_heal_dag(
    migrated_airflow_home: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "pipelines"
    (repo / "dags").mkdir(parents=True)
    with serve(FakeAirflow()) as server:
        notifier = f'[PatchitNotifier(heal="dag", api_url="{server.url}")]'
        dag = DAG.replace(
            "from patchit.integrations.airflow import on_failure_callback",
            "from patchit.integrations.airflow import PatchitNotifier",
        ).replace('on_failure_callback": on_failure_callback', f'on_failure_callback": {notifier}')
        (repo / "dags" / "orders_daily.py").write_text(dag)
        git(repo, "init", "-q", "-b", "main")
        sha = commit_all(repo, "orders_daily DAG")
        env = airflow_env(migrated_airflow_home, repo / "dags", _patchit_home)
        proc = subprocess.run(
            [AIRFLOW, "dags", "test", "orders_daily", "2026-11-25"],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    output = (proc.stdout + proc.stderr)[-3000:]
    [seen] = server.requests
    assert seen.path == "/api/v2/dags/patchit_heal/dagRuns", output
    event = seen.body["conf"]["event"]
    assert (event["pipeline_id"], event["unit_id"], event["error_type"]) == (
        "orders_daily", "load", "KeyError",
    )  # fmt: skip
    assert (event["repo_path"], event["commit"]) == (str(repo), sha)
    assert "triggered patchit_heal run patchit__orders_daily.load__" in output
    assert not (_patchit_home / "spool").exists()

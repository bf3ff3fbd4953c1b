"""The callback inside real Airflow 3: a failing task under `airflow dags test` spools one event."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.examples import AIRFLOW_PROJECT
from patchit.intake.spool import Spool
from tests.conftest import airflow_template_db, commit_all, git, seed_airflow_template

pytestmark = pytest.mark.slow

AIRFLOW = str(Path(sys.executable).parent / "airflow")

DAG = textwrap.dedent(
    """
    from datetime import datetime

    from airflow.sdk import dag, task

    from patchit.integrations.airflow import on_failure_callback


    @dag(
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        default_args={"on_failure_callback": on_failure_callback, "retries": 0},
    )
    def orders_daily():
        @task
        def extract():
            return {"order_id": 1, "amount": 10}

        @task
        def load(row):
            return row["amout"]

        load(extract())


    orders_daily()
    """
)


def heal_spooled() -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`patchit worker --once` as cron runs it, then the one incident `incidents --json` lists.
    The worker's home holds the run's migrated Airflow template, as after its first heal."""
    seed_airflow_template(Path(os.environ["PATCHIT_HOME"]))
    cli = [sys.executable, "-m", "patchit"]
    worker = subprocess.run([*cli, "worker", "--once"], capture_output=True, text=True, timeout=900)
    assert worker.returncode == 0, worker.stderr[-3000:]
    listed = subprocess.run(
        [*cli, "incidents", "--json"], capture_output=True, text=True, check=True
    )
    [incident] = json.loads(listed.stdout)
    return worker, incident


def airflow_env(airflow_home: Path, dags: Path, patchit_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(airflow_home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="True",
        PATCHIT_HOME=str(patchit_home),
    )
    return env


@pytest.fixture(scope="session")
def migrated_airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An isolated AIRFLOW_HOME with a migrated SQLite metadata DB (`airflow.db`, the default):
    a copy of the run's one template (tests/conftest.py), made once per session."""
    home = tmp_path_factory.mktemp("airflow-home")
    (home / "dags").mkdir()
    shutil.copyfile(airflow_template_db(), home / "airflow.db")
    return home


def test_failing_task_spools_one_valid_event_and_the_worker_heals_it(
    migrated_airflow_home: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    """callback -> spool (one valid event) -> `patchit worker --once` -> evidence, rename_key,
    Airflow harness: one `airflow dags test` of the failing DAG for both halves."""
    repo = tmp_path / "pipelines"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "orders_daily.py").write_text(DAG)
    git(repo, "init", "-q", "-b", "main")
    sha = commit_all(repo, "orders_daily DAG")
    env = airflow_env(migrated_airflow_home, repo / "dags", _patchit_home)
    proc = subprocess.run(
        [AIRFLOW, "dags", "test", "orders_daily", "2026-11-25"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "KeyError" in proc.stdout + proc.stderr
    with Spool.open(_patchit_home) as spool:
        rows = spool.rows()
    assert len(rows) == 1, proc.stdout[-3000:]
    event = UniversalFailureEvent.model_validate(json.loads(rows[0]["payload"]))
    assert (event.source.value, event.pipeline_id, event.unit_id) == (
        "airflow",
        "orders_daily",
        "load",
    )
    assert event.error_type == "KeyError" and "amout" in event.error_message
    assert event.traceback and "orders_daily.py" in event.traceback
    assert event.try_number == 1 and event.map_index == -1
    assert event.run_id and event.logical_date is not None
    assert event.logical_date.date().isoformat() == "2026-11-25"
    assert event.repo_path == str(repo) and event.commit == sha
    assert event.unit_path == "dags/orders_daily.py"
    assert event.context["dag_file"] == str(repo / "dags" / "orders_daily.py")
    # `airflow dags test` runs with no API server: no log URL that points nowhere
    assert event.context["triggered_by"] == "test" and event.log_location is None

    worker, incident = heal_spooled()
    assert (incident["status"], incident["classification"]) == ("fixed", "code_bug"), worker.stderr[
        -3000:
    ]
    branch = incident["branch"]
    assert git(repo, "rev-parse", f"{branch}~1") == sha
    assert 'row["amount"]' in git(repo, "show", f"{branch}:dags/orders_daily.py")
    assert git(repo, "branch", "--show-current") == "main"
    assert git(repo, "status", "--porcelain") == ""
    # on the branch, the DAG passes under `airflow dags test` (patchit's callback spools nothing)
    clone = tmp_path / "on-branch"
    git(repo, "clone", "-q", "--branch", branch, str(repo), str(clone))
    rerun = subprocess.run(
        [AIRFLOW, "dags", "test", "orders_daily", "2026-11-26"],
        env=airflow_env(migrated_airflow_home, clone / "dags", tmp_path / "other-home"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "KeyError" not in rerun.stdout + rerun.stderr, rerun.stdout[-3000:]
    assert not (tmp_path / "other-home" / "spool").exists()  # no failure was spooled


def test_patchit_notifier_spools_like_the_callback(
    migrated_airflow_home: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    """`on_failure_callback=[PatchitNotifier()]`, the Airflow 3 way, under real Airflow."""
    repo = tmp_path / "pipelines"
    (repo / "dags").mkdir(parents=True)
    dag = DAG.replace(
        "from patchit.integrations.airflow import on_failure_callback",
        "from patchit.integrations.airflow import PatchitNotifier",
    ).replace(
        '"on_failure_callback": on_failure_callback', '"on_failure_callback": [PatchitNotifier()]'
    )
    (repo / "dags" / "orders_daily.py").write_text(dag)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "orders_daily DAG")
    env = airflow_env(migrated_airflow_home, repo / "dags", _patchit_home)
    proc = subprocess.run(
        [AIRFLOW, "dags", "test", "orders_daily", "2026-11-25"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    with Spool.open(_patchit_home) as spool:
        rows = spool.rows()
    assert len(rows) == 1, (proc.stdout + proc.stderr)[-3000:]
    event = UniversalFailureEvent.model_validate(json.loads(rows[0]["payload"]))
    assert (event.unit_id, event.error_type) == ("load", "KeyError")


REFUSED_DAG = DAG.replace(
    'return row["amout"]',
    'import socket\n\n        return socket.create_connection(("127.0.0.1", 9), timeout=2)',
)


def test_refused_connection_is_escalated_as_infra(
    migrated_airflow_home: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "pipelines"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "orders_daily.py").write_text(REFUSED_DAG)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "orders_daily DAG")
    env = airflow_env(migrated_airflow_home, repo / "dags", _patchit_home)
    run = subprocess.run(
        [AIRFLOW, "dags", "test", "orders_daily", "2026-11-25"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Connection refused" in run.stdout + run.stderr
    _, incident = heal_spooled()
    assert (incident["status"], incident["classification"]) == ("escalated", "infra_issue")
    assert incident["branch"] is None and incident["attempts"] == 0
    assert Path(incident["report_md"]).is_file()
    assert git(repo, "branch", "--list", "patchit/*") == ""


def test_broken_dag_from_scan_is_healed_by_the_worker(tmp_path: Path, _patchit_home: Path) -> None:
    """`patchit airflow scan` spools an import error; the fix is verified by the import check."""
    repo = tmp_path / "pipelines"
    shutil.copytree(
        AIRFLOW_PROJECT / "dags",
        repo / "dags",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (repo / ".gitignore").write_text("__pycache__/\noutput/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop DAGs")
    dag = repo / "dags" / "shop_orders.py"
    dag.write_text(
        dag.read_text().replace("revenue_by_customer, write_json", "revenue_by_customr, write_json")
    )
    sha = commit_all(repo, "orders: tidy imports")
    cli = [sys.executable, "-m", "patchit"]
    scan = subprocess.run(
        [*cli, "airflow", "scan", "--dags-folder", str(repo / "dags")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert scan.returncode == 0 and "spooled 1 import error" in scan.stdout, scan.stderr
    worker, incident = heal_spooled()
    assert incident["status"] == "fixed", worker.stderr[-3000:]
    branch = incident["branch"]
    assert git(repo, "rev-parse", f"{branch}~1") == sha
    assert "revenue_by_customer, write_json" in git(repo, "show", f"{branch}:dags/shop_orders.py")

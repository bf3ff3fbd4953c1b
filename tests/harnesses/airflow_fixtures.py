"""Airflow test fixtures: a git repo holding the example DAG folder, and broken variants of it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from patchit.events.model import UniversalFailureEvent
from patchit.examples import AIRFLOW_PROJECT
from tests.conftest import commit_all, git

LOGICAL_DATE = datetime(2024, 1, 1, tzinfo=UTC)
REPORTS_DAG = "examples/airflow/dags/shop_reports.py"

# A task that sleeps far past any test's timeout: only the harness's limit can end it.
SLOW_DAG = '''"""A DAG whose only task sleeps for an hour."""
import time
from datetime import datetime

from airflow.sdk import dag, task


@dag(dag_id="slow_dag", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def slow_dag():
    @task
    def nap():
        time.sleep(3600)

    nap()


slow_dag()
'''


def make_airflow_repo(dest: Path) -> Path:
    """A git repo (one commit) with the example DAGs at examples/airflow/, as a user's repo."""
    shutil.copytree(AIRFLOW_PROJECT, dest / "examples" / "airflow",
                    ignore=shutil.ignore_patterns("__pycache__", "output"))  # fmt: skip
    (dest / ".gitignore").write_text("__pycache__/\noutput/\n")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "dags: initial")
    return dest


def break_with_key_error(root: Path) -> str:
    """write_report reads a settings key that does not exist; returns the expected error."""
    dag = root / REPORTS_DAG
    dag.write_text(dag.read_text().replace("SETTINGS['currency']", "SETTINGS['curency']"))
    commit_all(root, "reports: typo")
    return "KeyError: 'curency'"


def break_import(root: Path) -> str:
    """The DAG imports a helper name that does not exist; returns the expected error."""
    dag = root / "examples" / "airflow" / "dags" / "shop_orders.py"
    dag.write_text(
        dag.read_text().replace("revenue_by_customer, write_json", "revenue_by_customr, write_json")
    )
    commit_all(root, "orders: typo in import")
    return "revenue_by_customr"


def add_slow_dag(root: Path) -> None:
    (root / "examples" / "airflow" / "dags" / "slow_dag.py").write_text(SLOW_DAG)
    commit_all(root, "a slow dag")


def airflow_event(repo: Path, dag_id: str, task_id: str, dag_file: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source="airflow",
        pipeline_id=dag_id,
        unit_id=task_id,
        unit_path=dag_file,
        logical_date=LOGICAL_DATE,
        try_number=1,
        repo_path=str(repo),
        commit=git(repo, "rev-parse", "HEAD"),
        context={"dags_folder": str(repo / "examples" / "airflow" / "dags")},
    )


# A DAG whose one task runs the given code: what a patched task could try inside the sandbox.
ESCAPE_DAG = '''"""A DAG whose only task tries to leave the sandbox."""
from datetime import datetime

from airflow.sdk import dag, task


@dag(dag_id="escape_dag", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def escape_dag():
    @task
    def escape():
{body}

    escape()


escape_dag()
'''
ESCAPE_DAG_FILE = "examples/airflow/dags/escape_dag.py"


def add_escape_dag(root: Path, code: str) -> None:
    """`code` (statements) becomes the body of task escape_dag.escape in the worktree."""
    body = "\n".join(f"        {line}" for line in code.strip().splitlines())
    (root / ESCAPE_DAG_FILE).write_text(ESCAPE_DAG.replace("{body}", body))
    commit_all(root, "a task that tries to escape")

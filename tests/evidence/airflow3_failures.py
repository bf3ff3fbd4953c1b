"""Airflow 2 habits failing on real Airflow 3, captured once per test run.

`build_habits()` writes a git repo holding one DAG (`habits`) whose independent tasks each
use a task-context habit Airflow 3 removed and runs it once under `airflow dags test` with
patchit's callback attached (isolated AIRFLOW_HOME, SQLite); `copy_zoo` of `airflow_failures`
then gives each worker its copy, with the spooled events by task id, like the zoo's.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import (
    AIRFLOW,
    LOGICAL_DATE,
    airflow_env,
    migrate_home,
    spooled_events,
)

HABITS_DAG = "dags/habits.py"

HABITS_SRC = textwrap.dedent(
    '''
    """Tasks written for Airflow 2, run on Airflow 3."""

    from __future__ import annotations

    from datetime import datetime

    from airflow.sdk import dag, get_current_context, task

    from patchit.integrations.airflow import on_failure_callback


    @dag(
        schedule=None,
        start_date=datetime(2024, 1, 1),
        catchup=False,
        default_args={"on_failure_callback": on_failure_callback, "retries": 0},
    )
    def habits():
        @task
        def stamp(**context):
            day = context["execution_date"].strftime("%Y-%m-%d")
            return {"day": day, "at": context["execution_date"].isoformat()}

        @task
        def window():
            context = get_current_context()
            return f"{context['yesterday_ds']}..{context['tomorrow_ds_nodash']}"

        @task
        def operator_name(ti=None):
            return f"{ti.task_id} ran as {ti.operator}"

        @task
        def previous(**context):
            return context["prev_ds"]

        stamp()
        window()
        operator_name()
        previous()


    habits()
    '''
).lstrip()


def make_habits_repo(dest: Path) -> Path:
    (dest / "dags").mkdir(parents=True)
    (dest / HABITS_DAG).write_text(HABITS_SRC)
    (dest / ".gitignore").write_text("__pycache__/\n")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "habits: initial")
    return dest


def build_habits(base: Path) -> None:
    """The habits DAG run under real Airflow (about 25 s) in `base`, laid out as the zoo is:
    the `habits` fixture in tests/conftest.py runs it once per test run (not once per
    pytest-xdist worker) and gives each worker a copy (`copy_zoo`)."""
    repo = make_habits_repo(base / "repo")
    home = migrate_home(base / "airflow-home")
    out = base / "out"
    out.mkdir()
    env = airflow_env(home, repo / "dags", base / "patchit-home", out)
    proc = subprocess.run(
        [AIRFLOW, "dags", "test", "habits", LOGICAL_DATE],
        env=env, capture_output=True, text=True, timeout=600, cwd=repo,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    (base / "output.txt").write_text(output)
    events = spooled_events(base / "patchit-home")
    assert set(events) == {"stamp", "window", "operator_name", "previous"}, output[-4000:]

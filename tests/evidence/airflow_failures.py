"""Real Airflow 3 task failures, one per failure kind, captured once per test run.

`build_zoo()` writes a git repo holding one DAG (`zoo`) whose independent tasks each fail
in a different way, runs it once under `airflow dags test` with patchit's callback attached
(isolated AIRFLOW_HOME, SQLite) and keeps the spooled events; `copy_zoo()` gives each pytest
worker its own copy. Evidence, classifier and strategy tests build on these genuine
tracebacks; `run_zoo` runs the DAG again (after patches).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.intake.spool import Spool
from tests.conftest import airflow_template_db, commit_all, git

AIRFLOW = str(Path(sys.executable).parent / "airflow")
ZOO_DAG = "dags/zoo.py"
HELPERS = "dags/zoo_lib/helpers.py"
LOGICAL_DATE = "2024-03-01"

HELPERS_SRC = textwrap.dedent(
    '''
    """Helpers of the zoo DAG (a repo module, imported like a user's own)."""

    from __future__ import annotations

    import csv


    def summarise_orders(rows: list[dict]) -> dict[str, int]:
        return {"orders": len(rows), "amount": sum(r["amount"] for r in rows)}


    def write_rows(path: str, rows: list[dict], delimiter: str = ",") -> str:
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=sorted(rows[0]), delimiter=delimiter)
            writer.writeheader()
            writer.writerows(rows)
        return path
    '''
).lstrip()

ZOO_SRC = textwrap.dedent(
    '''
    """One DAG, many independent tasks, each failing in its own way."""

    from __future__ import annotations

    import http.server
    import os
    import socket
    import threading
    import time
    import urllib.request
    from datetime import datetime, timedelta

    from airflow.sdk import BaseHook, Variable, dag, task
    from zoo_lib import helpers

    from patchit.integrations.airflow import on_failure_callback

    OUT_DIR = os.environ["ZOO_OUT"]
    ORDER = {"order_id": 7, "amount": 1250, "customer": "ada"}
    ENDPOINTS = {"ZOO_API_URI": "https://api.example.invalid"}  # near the env var name


    def _serve(status: int) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.handle_request, daemon=True).start()
        return f"http://127.0.0.1:{server.server_port}/api/orders"


    @dag(
        schedule=None,
        start_date=datetime(2024, 1, 1),
        catchup=False,
        default_args={"on_failure_callback": on_failure_callback, "retries": 0},
    )
    def zoo():
        @task
        def extract_order():
            return dict(ORDER)

        @task
        def load_order(row):
            return row["amout"] * 100

        @task
        def total_amount():
            total = 10
            return totl + 1

        @task
        def summarise():
            return helpers.sumarise_orders([ORDER])

        @task
        def import_late():
            from zoo_lib.helpers import summarise_order

            return summarise_order([ORDER])

        @task
        def export_rows():
            return helpers.write_rows(f"{OUT_DIR}/export.csv", rowz=[ORDER])

        @task
        def write_daily(ds=None):
            path = f"{OUT_DIR}/daily/{ds}/orders.csv"
            with open(path, "w") as handle:
                handle.write("order_id,amount\\n7,1250\\n")
            return path

        @task
        def read_input():
            with open(f"{OUT_DIR}/incoming/orders.csv") as handle:
                return handle.read()

        @task
        def env_config():
            return os.environ["ZOO_API_URL"]

        @task
        def warehouse_conn():
            return BaseHook.get_connection("zoo_warehouse").host

        @task
        def threshold():
            return Variable.get("zoo_threshold")

        @task
        def refused():
            socket.create_connection(("127.0.0.1", 9), timeout=2)

        @task
        def api_503():
            return urllib.request.urlopen(_serve(503), timeout=5).read()

        @task
        def api_401():
            return urllib.request.urlopen(_serve(401), timeout=5).read()

        @task(execution_timeout=timedelta(seconds=1))
        def slow_query():
            time.sleep(10)

        @task
        def check_amounts():
            rows = [dict(ORDER), {"order_id": 8, "amount": -5, "customer": "bob"}]
            bad = [r for r in rows if r["amount"] < 0]
            if bad:
                raise ValueError(f"{len(bad)} upstream row(s) with a negative amount: {bad}")
            return len(rows)

        @task
        def missing_package():
            import zoo_vendor_sdk

            return zoo_vendor_sdk.VERSION

        load_order(extract_order())
        total_amount()
        summarise()
        import_late()
        export_rows()
        write_daily()
        read_input()
        env_config()
        warehouse_conn()
        threshold()
        refused()
        api_503()
        api_401()
        slow_query()
        check_amounts()
        missing_package()


    zoo()
    '''
).lstrip()


def airflow_env(airflow_home: Path, dags: Path, patchit_home: Path, out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ZOO_"))}
    env.update(
        AIRFLOW_HOME=str(airflow_home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="True",
        PATCHIT_HOME=str(patchit_home),
        ZOO_OUT=str(out),
    )
    return env


def make_zoo_repo(dest: Path) -> Path:
    (dest / "dags" / "zoo_lib").mkdir(parents=True)
    (dest / "dags" / "zoo_lib" / "__init__.py").write_text("")
    (dest / HELPERS).write_text(HELPERS_SRC)
    (dest / ZOO_DAG).write_text(ZOO_SRC)
    (dest / ".gitignore").write_text("__pycache__/\n")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "zoo: initial")
    return dest


def migrate_home(home: Path) -> Path:
    """An AIRFLOW_HOME whose metadata DB (`airflow.db`, the default) is a copy of the run's
    one migrated template (tests/conftest.py), as patchit's harness and the test deployments
    use it: `airflow db migrate` per home cost some 4 CPU-s each."""
    (home / "dags").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(airflow_template_db(), home / "airflow.db")
    return home


def run_zoo(
    repo: Path, home: Path, patchit_home: Path, out: Path, logical_date: str = LOGICAL_DATE
) -> str:
    """`airflow dags test zoo` once; returns its combined output."""
    out.mkdir(parents=True, exist_ok=True)
    env = airflow_env(home, repo / "dags", patchit_home, out)
    proc = subprocess.run(
        [AIRFLOW, "dags", "test", "zoo", logical_date],
        env=env, capture_output=True, text=True, timeout=600, cwd=repo,
    )  # fmt: skip
    return proc.stdout + proc.stderr


def spooled_events(patchit_home: Path) -> dict[str, UniversalFailureEvent]:
    with Spool.open(patchit_home) as spool:
        rows = spool.rows()
    events = [UniversalFailureEvent.model_validate(json.loads(r["payload"])) for r in rows]
    return {e.unit_id: e for e in events}


@dataclass(frozen=True)
class Zoo:
    repo: Path
    airflow_home: Path
    out: Path
    events: dict[str, UniversalFailureEvent]
    output: str

    def evidence(self, task_id: str, repo: Path | None = None, **kwargs: str) -> Evidence:
        return gather_airflow_evidence(self.events[task_id], repo or self.repo, **kwargs)

    def event_in(self, task_id: str, repo: Path) -> UniversalFailureEvent:
        """The task's event as if it had failed in `repo` (a copy): every path moved there."""
        text = self.events[task_id].model_dump_json()
        return UniversalFailureEvent.model_validate_json(text.replace(str(self.repo), str(repo)))

    def copy_repo(self, dest: Path) -> Path:
        """A copy of the failing checkout (evidence reads it; the event still names `repo`)."""
        shutil.copytree(self.repo, dest, ignore=shutil.ignore_patterns("__pycache__"))
        return dest


def build_zoo(base: Path) -> None:
    """The zoo DAG run under real Airflow (about 30 s) in `base`: the `zoo` fixture in
    tests/conftest.py builds it once per test run and gives each worker a copy."""
    repo = make_zoo_repo(base / "repo")
    home = migrate_home(base / "airflow-home")
    output = run_zoo(repo, home, base / "patchit-home", base / "out")
    (base / "output.txt").write_text(output)
    assert len(spooled_events(base / "patchit-home")) == 16, output[-4000:]


def copy_zoo(built: Path, factory: pytest.TempPathFactory) -> Zoo:
    """A private copy of the zoo built in `built`: every path in the events, the output and
    the Airflow home's text files moved to the copy, so nothing a test does reaches `built`."""
    base = factory.mktemp("zoo")
    shutil.copytree(built, base, symlinks=True, dirs_exist_ok=True)
    for path in (base / "airflow-home").rglob("*"):
        if path.is_file() and path.suffix in {".cfg", ".py", ".json"}:
            path.write_text(path.read_text().replace(str(built), str(base)))
    events = {
        task: UniversalFailureEvent.model_validate_json(
            event.model_dump_json().replace(str(built), str(base))
        )
        for task, event in spooled_events(base / "patchit-home").items()
    }
    output = (base / "output.txt").read_text().replace(str(built), str(base))
    return Zoo(base / "repo", base / "airflow-home", base / "out", events, output)


def script_failure(repo: Path, rel: str, source: str, task_id: str) -> UniversalFailureEvent:
    """Commit `source` at `rel` in `repo`, run it with real Python, and return the failure as an
    Airflow-shaped event (the traceback is genuine; Airflow itself is not involved)."""
    from patchit.intake.airflow_scan import split_error

    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    sha = commit_all(repo, f"add {rel}")
    proc = run_script(repo, rel)
    assert proc.returncode == 1 and "Traceback" in proc.stderr, proc.stdout + proc.stderr
    error_type, message = split_error(proc.stderr)
    return UniversalFailureEvent(
        source="airflow", pipeline_id="scripts", unit_id=task_id, unit_path=rel,
        error_type=error_type, error_message=message, traceback=proc.stderr,
        repo_path=str(repo), commit=sha,
    )  # fmt: skip


def run_script(repo: Path, rel: str) -> subprocess.CompletedProcess[str]:
    path = repo / rel
    env = {"PYTHONPATH": str(path.parent), "PATH": os.environ.get("PATH", "")}
    return subprocess.run(
        [sys.executable, "-P", str(path)],
        capture_output=True, text=True, env=env, cwd=repo, timeout=60, check=False,
    )  # fmt: skip


def init_repo(dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / ".gitignore").write_text("__pycache__/\n")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "init")
    return dest

"""A real Airflow deployment for tests: API server, scheduler and DAG processor, SQLite metadata
DB (a copy of patchit's migrated template) or the given one (a Postgres database, migrated
here with `airflow db migrate`), LocalExecutor, on a free port; no Docker.

Auth is Airflow's simple auth manager with every user an admin, so the API takes no token.
Tasks get `PATCHIT_HOME`, so patchit's failure callback spools into the test's home.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import patchit
from patchit.harnesses.airflow.home import prepare_airflow_home

AIRFLOW = str(Path(sys.executable).parent / "airflow")
PATCHIT_ROOT = Path(patchit.__file__).resolve().parents[1]
START_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 180.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Deployment:
    def __init__(self, url: str, logs: Path, task_logs: Path) -> None:
        self.url = url
        self.logs = logs
        self.task_logs = task_logs

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}/api/v2{path}", data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def wait_for_dag(self, dag_id: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                self.call("PATCH", f"/dags/{dag_id}", {"is_paused": False})
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        raise AssertionError(f"DAG {dag_id} never showed up; logs in {self.logs}")

    def run_dag(self, dag_id: str, day: str) -> str:
        """Trigger a run for the logical date `day` and wait for it; its final state."""
        run = self.call("POST", f"/dags/{dag_id}/dagRuns", {
            "dag_run_id": f"test__{day}_{time.time_ns()}",
            "logical_date": datetime.fromisoformat(day).replace(tzinfo=UTC).isoformat(),
        })  # fmt: skip
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            state = self.call("GET", f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}")["state"]
            if state in ("success", "failed"):
                return str(state)
            time.sleep(0.5)
        raise AssertionError(f"run {run['dag_run_id']} did not finish; logs in {self.logs}")

    def wait_for_runs(self, dag_id: str, count: int = 1) -> list[dict[str, Any]]:
        """The DAG's runs once `count` of them have finished (runs nobody here triggered)."""
        deadline = time.monotonic() + RUN_TIMEOUT_S
        runs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            runs = self.call("GET", f"/dags/{dag_id}/dagRuns")["dag_runs"]
            if sum(r["state"] in ("success", "failed") for r in runs) >= count:
                return list(runs)
            time.sleep(0.5)
        raise AssertionError(f"{dag_id}: {runs} did not finish; logs in {self.logs}")

    def task_log(self, dag_id: str) -> str:
        """Every task log of the DAG's runs, as the worker wrote them (for failure messages)."""
        found = sorted(self.task_logs.glob(f"dag_id={dag_id}/**/*.log"))
        return "\n".join(path.read_text(errors="replace")[-6000:] for path in found)


def require_airflow(database_url: str | None) -> None:
    """Fail (never skip) when what the deployment runs is not installed."""
    missing = [] if Path(AIRFLOW).is_file() else ["apache-airflow"]
    if database_url and database_url.startswith("postgresql"):
        missing += [m for m in ("asyncpg", "psycopg2") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing for the Airflow deployment: `make test` installs "
            "them (pip install -e '.[dbt,airflow,dev]')",
            pytrace=False,
        )


def migrate(env: dict[str, str], cwd: Path) -> float:
    """`airflow db migrate` for the deployment's database; how long it took (s)."""
    started = time.monotonic()
    done = subprocess.run(
        [AIRFLOW, "db", "migrate"], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=START_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return time.monotonic() - started


@contextmanager
def airflow_deployment(
    dags: Path,
    scratch: Path,
    patchit_home: Path,
    database_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    local_settings: str | None = None,
) -> Iterator[Deployment]:
    """`local_settings`: the text of `$AIRFLOW_HOME/config/airflow_local_settings.py` (cluster
    policies), when given."""
    require_airflow(database_url)
    home, db, _ = prepare_airflow_home(scratch)
    if local_settings is not None:
        (home / "config").mkdir()
        (home / "config" / "airflow_local_settings.py").write_text(local_settings)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=database_url or f"sqlite:///{db}",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__DEFAULT_TASK_RETRIES="0",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API__HOST="127.0.0.1",
        AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(_free_port()),  # not 8793: may be taken
        # one secret for all three processes: else each makes its own, and tasks' tokens fail
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_urlsafe(32),
        AIRFLOW__API__SECRET_KEY=secrets.token_urlsafe(32),
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="2",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
        PATCHIT_HOME=str(patchit_home),
        SHOP_OUTPUT_DIR=str(scratch / "output"),
        # the DAGs' own modules, and this checkout's patchit (the callback, the heal DAG)
        PYTHONPATH=os.pathsep.join([str(dags), str(PATCHIT_ROOT)]),
        **(extra_env or {}),
    )
    logs = scratch / "airflow-logs"
    logs.mkdir(exist_ok=True)
    procs = []
    if database_url:
        migrated_s = migrate(env, scratch)
        (logs / "migrate.txt").write_text(f"airflow db migrate: {migrated_s:.1f} s\n")
    try:
        for part in (["api-server", "--port", str(port)], ["scheduler"], ["dag-processor"]):
            with (logs / f"{part[0]}.log").open("w") as out:
                procs.append(subprocess.Popen(
                    [AIRFLOW, *part], env=env, cwd=scratch, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True,
                ))  # fmt: skip
        yield Deployment(f"http://127.0.0.1:{port}", logs, home / "logs")
    finally:
        for proc in procs:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

"""Isolated AIRFLOW_HOMEs for the Airflow harness: a pre-migrated template metadata DB, copied
per candidate, and an environment scrubbed of the user's Airflow settings.

`airflow db migrate` costs ~7-12 s; it runs once per Airflow version and patchit home
(`$PATCHIT_HOME/cache/airflow-db/<version>.sqlite3`, built under a file lock and moved into
place atomically), and every candidate gets a byte copy of it.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from patchit.config import resolve_home
from patchit.errors import HarnessError
from patchit.sandbox.isolation import allowed_env

MIGRATE_TIMEOUT_S = 300.0
# Set inside every sandbox: patchit's callback must not spool the sandbox's own failures.
CALLBACK_DISABLED_ENV = "PATCHIT_CALLBACK_DISABLED"


def airflow_version() -> str:
    try:
        return importlib.metadata.version("apache-airflow")
    except importlib.metadata.PackageNotFoundError as exc:
        raise HarnessError(
            "Airflow is not installed; install it with `pip install 'patchit[airflow]'`"
        ) from exc


def template_db_path() -> Path:
    return resolve_home() / "cache" / "airflow-db" / f"{airflow_version()}.sqlite3"


def ensure_template_db(timeout_s: float = MIGRATE_TIMEOUT_S) -> tuple[Path, int]:
    """The migrated template DB and how long this call spent migrating (0 if cached)."""
    path = template_db_path()
    if path.is_file():
        return path, 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / f"{path.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another harness may be migrating the same one
        if path.is_file():
            return path, 0
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=path.parent, prefix="migrate-") as tmp:
            home = Path(tmp)
            db = home / "airflow.db"
            env = airflow_env(home, db, dags_folder=home / "dags", scratch_home=home)
            proc = subprocess.run(
                [sys.executable, "-m", "airflow", "db", "migrate"],
                env=env, cwd=home, capture_output=True, text=True, timeout=timeout_s,
            )  # fmt: skip
            if proc.returncode != 0 or not db.is_file():
                tail = (proc.stdout + proc.stderr)[-3000:]
                raise HarnessError(f"`airflow db migrate` failed for the template DB:\n{tail}")
            os.replace(db, path)
        return path, int((time.monotonic() - started) * 1000)


def prepare_airflow_home(scratch: Path) -> tuple[Path, Path, int]:
    """A fresh AIRFLOW_HOME in `scratch` holding a copy of the template DB:
    (home, db, migrate_ms)."""
    template, migrate_ms = ensure_template_db()
    home = scratch / "airflow-home"
    if home.exists():
        shutil.rmtree(home)
    (home / "logs").mkdir(parents=True)
    (home / "plugins").mkdir()
    db = home / "airflow.db"
    shutil.copyfile(template, db)
    return home, db, migrate_ms


def _tmp_dir(airflow_home: Path) -> Path:
    """The run's temp dir: inside its AIRFLOW_HOME (in the scratch dir, writable by the run,
    and not among the outputs the data check compares)."""
    tmp = airflow_home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def scrubbed_environ(referenced: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted part of patchit's environment (`allowed_env`) plus the `referenced`
    variables the DAG code reads, minus every Airflow setting, so nothing of the user's
    deployment (metadata DB, executor, connections, secrets backend, config file) and nothing
    else of patchit's environment reaches the sandbox."""
    return {
        name: value
        for name, value in allowed_env(os.environ, referenced=referenced).items()
        if not name.startswith("AIRFLOW") and name not in ("PYTHONPATH", "PYTHONHOME", "HOME")
    }


def airflow_env(
    home: Path,
    db: Path,
    dags_folder: Path,
    scratch_home: Path,
    python_path: list[Path] | None = None,
    referenced: Iterable[str] = (),
) -> dict[str, str]:
    """The sandbox's whole environment: isolated home, SQLite DB, dags folder in the worktree,
    and of patchit's own only the allowlist plus the `referenced` variables."""
    env = scrubbed_environ(referenced)
    env.update(
        {
            "HOME": str(scratch_home),  # nothing may land in the user's ~ (~/airflow, caches)
            "TMPDIR": str(_tmp_dir(home)),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW_CONFIG": str(home / "airflow.cfg"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{db}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DEFAULT_TASK_RETRIES": "0",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__LOGGING__REMOTE_LOGGING": "False",
            "AIRFLOW__METRICS__STATSD_ON": "False",
            "AIRFLOW__METRICS__OTEL_ON": "False",
            "AIRFLOW__TRACES__OTEL_ON": "False",
            "AIRFLOW__SECRETS__BACKEND": "",
            "AIRFLOW__WORKERS__SECRETS_BACKEND": "",
            CALLBACK_DISABLED_ENV: "1",
            "PYTHONPATH": os.pathsep.join(str(p) for p in (python_path or [dags_folder])),
            "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ in the worktree's tracked dirs
        }
    )
    return env

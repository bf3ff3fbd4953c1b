"""A warm Airflow parent: `python -m patchit.harnesses.airflow.fork`, one fork per candidate.

Importing Airflow costs seconds, and the first call into its in-process execution API costs
more (cadwyn generates its versioned routers, ~15 s here). The parent pays both once, then
runs patchit's own warm-up DAG on its own copy of the template DB (`warmup`: compiled
SQL, configured mappers, the execution API's first requests), and forks one child per request:
the child takes the candidate's environment, re-points Airflow's settings at the candidate's
AIRFLOW_HOME and DB, and runs `runner.run_to_file`. No user DAG, DagBag or user
module is ever in the parent, so none is shared between candidates: each child starts from
the parent's state, imports the candidate's own files, and exits.

Protocol (one JSON object per line):

    stdin   {"request": path, "result": path, "log": path, "cwd": dir, "env": {...},
             "timeout_s": float, "writable": [dir, ...] (optional: Landlock in the child)}
    stdout  {"ready": true, "pid": int} once, then per request {"child": pid},
            {"exit": code, "timed_out": bool}

The child runs in its own session, and the parent enforces the time limit itself: past
`timeout_s` it kills the child's process group and reports `timed_out`, then lives on to
serve the next candidate. The parent is a child subreaper (`patchit.sandbox.reaper`): what a
child daemonized comes back to it and is killed once the child is done, and what the child
left in the private /tmp (when its Landlock rules let it write there) is removed, so nothing
of one candidate is alive or on disk for the next. The pids are the parent's own: inside
bubblewrap's pid namespace they mean nothing outside, so the harness never signals them; if
the parent itself stops answering, the harness kills the whole sandbox.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from patchit.config import resolve_home
from patchit.errors import HarnessError
from patchit.harnesses.airflow.home import ensure_template_db
from patchit.harnesses.airflow.warmup import WARM_DB_ENV, adopt, warm_up
from patchit.harnesses.warm import WarmProcess
from patchit.sandbox.isolation import PRIVATE_TMP, Sandbox, allowed_env
from patchit.sandbox.landlock import restrict_writes
from patchit.sandbox.private_dirs import AIRFLOW_PARENTS, make_private_dir
from patchit.sandbox.reaper import (
    become_subreaper,
    children,
    clear_new_entries,
    end_strays,
    entries,
)

STARTUP_TIMEOUT_S = 180.0
# How long past a candidate's time limit the parent has to kill it and say so.
KILL_GRACE_S = 30.0


# Imported by every run on its way (measured: what a child imported that its parent had not);
# importing them once in the parent spares each child ~0.1 s. None is a candidate's module.
RUN_MODULES = (
    "a2wsgi",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.tls",
    "airflow.dag_processing.bundles.local",
    "airflow.dag_processing.collection",
    "airflow.providers.standard.operators.empty",
    "airflow.providers.standard.operators.trigger_dagrun",
    "airflow.providers.standard.sensors.external_task",
    "airflow.sdk.definitions.asset.metadata",
    "airflow.serialization.definitions.mappedoperator",
    "airflow.timetables.trigger",
    "airflow.version",
    "encodings.idna",
    "jinja2.ext",
    "patchit.harnesses.airflow.runner",
)


def preload() -> None:
    """Import what every run needs and build the execution API app once (before any fork:
    no threads are started here, and no DB connection is opened)."""
    import airflow.dag_processing.dagbag
    import airflow.models.dagrun
    import airflow.providers.standard.operators.python
    import airflow.sdk
    import airflow.sdk.execution_time.supervisor
    import airflow.sdk.execution_time.task_runner  # noqa: F401
    from airflow.api_fastapi.execution_api import app as execution_api

    for name in RUN_MODULES:
        with contextlib.suppress(ImportError):  # another Airflow may lay them out otherwise
            importlib.import_module(name)
    warm_orm()
    callers = CallersLifespan(execution_api.lifespan)
    app: Any = execution_api.create_task_execution_api_app(lifespan=callers)  # type: ignore[arg-type]
    # Cadwyn would generate its versioned routers on the first request, in every child.
    if not getattr(app, "_cadwyn_initialized", True):
        app._cadwyn_initialize()

    # Every later InProcessExecutionAPI (one per task) gets this app instead of a new one,
    # with the lifespan it asked for: its own registry, in which it stubs the JWT validator.
    def shared_app(lifespan: Any = execution_api.lifespan) -> Any:
        callers.current = lifespan
        return app

    execution_api.create_task_execution_api_app = shared_app


class CallersLifespan:
    """The shared execution API app's lifespan: the one its latest caller passed.

    `InProcessExecutionAPI` gives each app its own services registry (a copy of Airflow's
    lifespan with a new one) and puts a stand-in JWT validator in it after building the app;
    the lifespan builds a real validator only if the registry has none, and a real one needs
    `api_auth/jwt_secret`, which nothing sets for an imported Airflow (only `python -m airflow`
    writes one to a new airflow.cfg). A lifespan's exit empties its registry, so the app's
    lifespan must not keep the one the parent built the app with: after the warm-up's API
    shut down, every child's lifespan would find it empty and fail on the secret."""

    def __init__(self, default: Any) -> None:
        self.current = default

    def __call__(self, app: Any) -> Any:
        return self.current(app)


def warm_orm() -> None:
    """What every child would otherwise build again, none of it the candidate's: every ORM
    model imported and SQLAlchemy's mappers configured (about 40% of a run otherwise), and
    the metrics registry's YAML parsed (Airflow reads it on the first counter)."""
    from airflow._shared.observability.metrics import stats
    from airflow.models import import_all_models
    from sqlalchemy.orm import configure_mappers

    import_all_models()  # type: ignore[no-untyped-call]
    configure_mappers()
    stats._get_registry()


def enter_candidate(job: dict[str, Any]) -> None:
    """In the child: the candidate's env, cwd, sys.path and Airflow settings."""
    os.setsid()
    log_fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.environ.clear()
    os.environ.update(job["env"])
    tempfile.tempdir = None  # the parent's choice was made under its own TMPDIR
    os.chdir(job["cwd"])
    if job.get("writable"):  # before any of the candidate's code: its own dirs only
        restrict_writes(job["writable"])
    for entry in reversed(job["env"].get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)

    from airflow import settings

    settings.dispose_orm(do_log=False)
    settings.configure_vars()  # type: ignore[no-untyped-call]
    settings.configure_orm()  # type: ignore[no-untyped-call]
    adopt(settings.engine)


def warm_up_or_restart(reply_fd: int) -> dict[str, Any] | None:
    """The warm-up run (`warmup`) on the copy of the template DB `WARM_DB_ENV` names.
    Should it fail, or leave a thread behind (which a fork must not inherit), the parent
    starts over as itself without it: a cold parent is slower, never wrong."""
    template = os.environ.get(WARM_DB_ENV)
    if not template:
        return None
    try:
        report = warm_up(Path(os.environ["AIRFLOW_HOME"]), Path(template))
    except Exception:
        import traceback

        traceback.print_exc()
        report = {"passed": False}
    if report.get("passed") and report.get("threads") == 1:
        return report
    print(f"patchit: the Airflow parent's warm-up failed ({report}); restarting cold",
          file=sys.stderr, flush=True)  # fmt: skip
    os.environ.pop(WARM_DB_ENV)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(reply_fd, 1)  # the protocol's stdout again, as the new process expects it
    os.execv(sys.executable, [sys.executable, "-m", "patchit.harnesses.airflow.fork"])


def serve() -> int:
    reply_fd = os.dup(1)
    # Nothing Airflow prints may corrupt the protocol: fd 1 goes to stderr in the parent.
    os.dup2(2, 1)
    reply = os.fdopen(reply_fd, "w", buffering=1, encoding="utf-8")
    preload()
    warm = warm_up_or_restart(reply_fd)
    become_subreaper()  # a candidate's daemonized process comes back here to be ended
    reply.write(json.dumps({"ready": True, "pid": os.getpid(), "warm": warm}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        own = children()  # none of them the candidate's
        tmp = private_tmp(job)
        tmp_before = entries(tmp) if tmp is not None else set()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                enter_candidate(job)
                from patchit.harnesses.airflow.runner import run_to_file

                code = run_to_file(job["request"], job["result"])
            except BaseException:
                import traceback

                traceback.print_exc()  # into the candidate's log: the harness reports it
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        reply.write(json.dumps({"child": pid}) + "\n")
        code, timed_out = wait_child(pid, job.get("timeout_s"))
        end_strays(keep=own)  # nothing of the candidate outlives its job
        if tmp is not None:
            clear_new_entries(tmp, tmp_before)
        reply.write(json.dumps({"exit": code, "timed_out": timed_out}) + "\n")
    return 0


def private_tmp(job: dict[str, Any]) -> Path | None:
    """The sandbox's private /tmp when this job's fork may write it (it is then among the
    fork's Landlock dirs, which a job names only inside bubblewrap), else None."""
    return PRIVATE_TMP if str(PRIVATE_TMP) in (job.get("writable") or []) else None


def wait_child(pid: int, timeout_s: float | None) -> tuple[int, bool]:
    """Reap the forked child: (its exit code, whether it ran past `timeout_s` and was killed
    with its process group)."""
    timed_out = False
    if timeout_s is not None:
        pidfd = os.pidfd_open(pid)
        try:
            ready, _, _ = select.select([pidfd], [], [], max(float(timeout_s), 0.0))
        finally:
            os.close(pidfd)
        if not ready:
            timed_out = True
            for kill in (os.killpg, os.kill):  # its session's group, then itself if it left
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), timed_out


class ForkParent(WarmProcess):
    """The harness's handle on a running `fork` parent."""

    label = "Airflow parent"

    def __init__(self, sandbox: Sandbox, home: Path, warm_db: Path | None = None) -> None:
        self._home = home
        env = {k: v for k, v in allowed_env(os.environ).items() if not k.startswith("AIRFLOW")}
        env |= {
            "HOME": str(home),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW_CONFIG": str(home / "airflow.cfg"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'unused.db'}",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        }
        if warm_db is not None:
            env[WARM_DB_ENV] = str(warm_db)
        argv = [sys.executable, "-m", "patchit.harnesses.airflow.fork"]
        super().__init__(argv, sandbox, env, cwd=home)

    @classmethod
    def start(cls, sandbox: Sandbox, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> ForkParent:
        """Spawn a parent in `sandbox` (plus its own home, writable) and wait until Airflow is
        imported; HarnessError if it cannot start."""
        # The parent's own Airflow home: it imports Airflow but never opens this DB. It is
        # kept out of /tmp, so that a fork may be given the private /tmp to write.
        # A parent killed with patchit leaves it to the next run's recovery sweep.
        home = make_private_dir(resolve_home(), AIRFLOW_PARENTS).resolve()
        if sandbox.confines_writes and not sandbox.covers(home):
            sandbox = dataclasses.replace(sandbox, writable=(*sandbox.writable, home))
        # The warm-up's own copy of the template DB, in the parent's home (the cache may be
        # out of the sandbox's sight); the first verify would migrate the template anyway.
        warm_db: Path | None = home / "warm-up.db"
        try:
            shutil.copyfile(ensure_template_db()[0], home / "warm-up.db")
        except (HarnessError, OSError, subprocess.SubprocessError):
            warm_db = None  # the parent starts cold; the verify reports the DB's problem
        parent = cls(sandbox, home, warm_db)
        parent.wait_ready(startup_timeout_s)
        return parent

    def run(self, job: dict[str, Any], timeout_s: float) -> bool:
        """Run one candidate in a forked child; True if it hit the timeout (and was killed).

        The parent kills a child past `timeout_s` itself (its pids are its own namespace's);
        a parent that does not answer within `KILL_GRACE_S` after that is stopped whole."""
        deadline = time.monotonic() + timeout_s
        if not self.send({**job, "timeout_s": timeout_s}):
            raise HarnessError(f"the Airflow parent died: {self.stderr_tail()}")
        child = self.read_line(max(deadline - time.monotonic(), 1.0) + KILL_GRACE_S)
        if child is None:
            self.stop()
            raise HarnessError(f"the Airflow parent did not fork: {self.stderr_tail()}")
        done = self.read_line(max(deadline - time.monotonic(), 0.0) + KILL_GRACE_S)
        if done is None:  # the parent hangs or died: the whole sandbox goes
            self.stop()
            return True
        return bool(done.get("timed_out"))

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self._home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(serve())

"""A warm dbt process: `python -m patchit.harnesses.dbt_worker`.

Importing dbt costs seconds; a worker pays it once and then runs many invocations with
`dbtRunner`, one at a time, each in a fork of itself (`serve_request`): a run's writes are
confined to its own dirs there (`writable`, Landlock) and nothing it changes outlives it.
Protocol (one JSON object per line):

    stdin   {"args": [...], "cwd": "...", "env": {...}, "log_path": "...",
             "writable": [dir, ...] (optional)}
    reply   {"success": bool, "exception": str | null, "duration_ms": int,
             "results": [{"unique_id", "status", "message", "resource_type"}]}

Each request runs in its `cwd` (relative DuckDB paths resolve against it, as for the user's
dbt) and the worker returns to `/` afterwards. Replies go to the fd that was stdout when the
worker started; fds 1 and 2 are pointed at the request's log file while dbt runs (and at
/dev/null between requests), so nothing dbt or a C extension prints can corrupt the protocol.
The first line written is `{"ready": true, "pid": ..., "dbt_version": ...}` once dbt is
imported.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from patchit.harnesses.warm import WarmProcess
from patchit.sandbox.isolation import PRIVATE_TMP, Sandbox, allowed_env
from patchit.sandbox.landlock import restrict_writes

STARTUP_TIMEOUT_S = 120.0
_PRELOAD = (
    "dbt.cli.main",
    "dbt.task.build",
    "dbt.parser.manifest",
    "dbt.adapters.duckdb",
    "dbt.adapters.duckdb.impl",
    "duckdb",
    "agate",
)

# Overlaid on the worker's own environment for every request.
_BASE_ENV = dict(os.environ)


def _status_text(status: Any) -> str:
    return str(getattr(status, "value", status))


def _collect_results(result: Any) -> list[dict[str, Any]]:
    """Node results of a dbtRunnerResult.result (RunExecutionResult for build/run/test)."""
    rows: list[dict[str, Any]] = []
    for item in getattr(result, "results", None) or []:
        node = getattr(item, "node", None)
        rows.append(
            {
                "unique_id": getattr(node, "unique_id", None),
                "status": _status_text(getattr(item, "status", "")),
                "message": getattr(item, "message", None),
                "resource_type": _status_text(getattr(node, "resource_type", "")),
            }
        )
    return rows


def _release_duckdb() -> None:
    """dbt-duckdb keeps its database open in a class attribute after the run; close it so the
    candidate's DB copy is unlocked (and can be deleted) as soon as the request is done."""
    try:
        from dbt.adapters.duckdb.connections import DuckDBConnectionManager
    except ImportError:
        return
    env = getattr(DuckDBConnectionManager, "_ENV", None)
    if env is not None:
        try:
            env.close()
        except Exception as exc:  # the next request opens a fresh environment either way
            print(f"patchit dbt worker: closing DuckDB failed: {exc}", file=sys.stderr)
        DuckDBConnectionManager._ENV = None


def run_request(request: dict[str, Any], stderr_fd: int) -> dict[str, Any]:
    from dbt.cli.main import dbtRunner

    started = time.monotonic()
    os.environ.clear()
    os.environ.update(_BASE_ENV)
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    tempfile.tempdir = None  # TMPDIR may differ from the worker's own
    os.chdir(request["cwd"])
    log_fd = os.open(request["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull_fd = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    try:
        res = dbtRunner().invoke(list(request["args"]))
        exception = (
            None if res.exception is None else f"{type(res.exception).__name__}: {res.exception}"
        )
        reply: dict[str, Any] = {
            "success": bool(res.success),
            "exception": exception,
            "results": _collect_results(res.result),
        }
    except (Exception, SystemExit) as exc:  # report it and keep serving the next request
        traceback.print_exc()
        reply = {"success": False, "exception": f"{type(exc).__name__}: {exc}", "results": []}
    finally:
        _release_duckdb()
        # The request's cwd (holding its DB copy) is deleted after the run; do not sit in it.
        os.chdir("/")
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(devnull_fd, 1)
        os.dup2(stderr_fd, 2)
        os.close(log_fd)
        os.close(devnull_fd)
    reply["duration_ms"] = int((time.monotonic() - started) * 1000)
    return reply


_WARM_UP_SCHEMA = """\
version: 2
models:
  - name: warm_up
    columns:
      - name: id
        data_tests: [not_null]
"""


def _warm_up(stderr_fd: int) -> None:
    """Build a tiny file-backed project twice, the second time after a model changed: dbt's
    first invocation in a process pays for lazily built JSON schemas and templates, and its
    first partial parse, table build and test pay again; none of that should land on the
    first candidate."""
    with tempfile.TemporaryDirectory(prefix="patchit-dbt-warmup-") as tmp:
        root = Path(tmp)
        (root / "models").mkdir()
        (root / "models" / "schema.yml").write_text(_WARM_UP_SCHEMA)
        (root / "dbt_project.yml").write_text(
            "name: patchit_warm_up\nprofile: patchit_warm_up\nconfig-version: 2\n"
            "models:\n  patchit_warm_up:\n    +materialized: table\n"
        )
        (root / "profiles.yml").write_text(
            "patchit_warm_up:\n  target: dev\n  outputs:\n    dev:\n"
            "      type: duckdb\n      path: warm_up.duckdb\n"
        )
        args = ["build", "--project-dir", tmp, "--profiles-dir", tmp]
        args += ["--target-path", f"{tmp}/target", "--log-path", f"{tmp}/logs"]
        # No static parser here: its Rust thread pool would make the worker multi-threaded,
        # and a fork of it (one per request) would wait forever on threads it lacks.
        env = {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DBT_STATIC_PARSER": "false"}
        request = {"args": args, "cwd": tmp, "env": env, "log_path": f"{tmp}/out.log"}
        for sql in ("select 1 as id\n", "select 2 as id\n"):
            (root / "models" / "warm_up.sql").write_text(sql)
            reply = run_request(request, stderr_fd)
            if not reply["success"]:  # a cold first request is slower, not wrong: carry on
                print(f"patchit dbt worker: warm-up failed: {reply['exception']}", file=sys.stderr)
                return


def _reply(channel: TextIO, payload: dict[str, Any]) -> None:
    channel.write(json.dumps(payload) + "\n")
    channel.flush()


def main() -> int:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    stderr_fd = os.dup(2)
    devnull_fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull_fd, 1)
    os.close(devnull_fd)

    # The expensive imports, paid before "ready" rather than by the first request.
    for module in _PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # dbt itself missing is fatal; a missing adapter is not
            if module == "dbt.cli.main":
                raise
            print(f"patchit dbt worker: cannot preload {module}: {exc}", file=sys.stderr)

    _warm_up(stderr_fd)
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads > 1:  # a fork would lack the other threads: say so in the worker's stderr
        print(f"patchit dbt worker: {threads} threads before forking requests", file=sys.stderr)
    dbt_version = importlib.metadata.version("dbt-core")
    _reply(channel, {"ready": True, "pid": os.getpid(), "dbt_version": dbt_version})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("args"), list):
                raise ValueError("a request is an object with an `args` list")
            if not request.get("cwd") or not request.get("log_path"):
                raise ValueError("a request needs `cwd` and `log_path`")
        except ValueError as exc:
            _reply(channel, {"success": False, "exception": f"bad request: {exc}", "results": []})
            continue
        _reply(channel, serve_request(request, stderr_fd))
    return 0


def serve_request(request: dict[str, Any], stderr_fd: int) -> dict[str, Any]:
    """Run one request in a fork of the warm worker and return its reply: nothing the run
    does (its environment, imports, globals) survives it, and with `writable` in the request
    its writes are confined to those dirs (Landlock) before dbt reads the project."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        code = 1
        try:
            try:
                if request.get("writable"):
                    restrict_writes(request["writable"])
            except OSError as exc:
                why = f"patchit: cannot confine the run's writes: {exc}"
                reply = {"success": False, "results": [], "exception": why}
            else:
                reply = run_request(request, stderr_fd)
            with os.fdopen(write_fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(reply))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        answer: dict[str, Any] = json.loads(data)
        return answer
    except ValueError:
        how = os.waitstatus_to_exitcode(status)
        ended = f"signal {-how}" if how < 0 else f"exit {how}"
        return {"success": False, "results": [], "exception": f"the dbt run died ({ended})"}


# -- the parent's side ------------------------------------------------------------------------


def read_run_results(path: Path) -> list[dict[str, Any]]:
    """run_results.json rows in the worker's reply shape (empty when dbt wrote none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [
        {
            "unique_id": row.get("unique_id"),
            "status": row.get("status"),
            "message": row.get("message"),
            "resource_type": str(row.get("unique_id", "")).split(".")[0],
        }
        for row in data.get("results", [])
    ]


class WarmDbtWorker(WarmProcess):
    """The parent's handle on one worker process: start, send a request, stop."""

    label = "dbt worker"

    @classmethod
    def start(cls, sandbox: Sandbox, startup_timeout_s: float = STARTUP_TIMEOUT_S) -> WarmDbtWorker:
        """Spawn a worker in `sandbox` and wait until dbt is imported; HarnessError if it
        cannot start."""
        worker = cls.spawn(sandbox)
        worker.wait_ready(startup_timeout_s)
        return worker

    @classmethod
    def spawn(cls, sandbox: Sandbox) -> WarmDbtWorker:
        """Spawn a worker without waiting for it (`wait_ready` later, from any thread).

        bwrap's --die-with-parent ties the sandbox to the *thread* that spawned it, so a
        worker that must outlive a helper thread is spawned by the caller's thread."""
        # Only the allowlisted environment: patchit's own DBT_* settings and everything else
        # of its environment stay out; each request brings what its run needs.
        env = allowed_env(os.environ) | {"HOME": str(PRIVATE_TMP)}
        return cls([sys.executable, "-m", "patchit.harnesses.dbt_worker"], sandbox, env)

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """Send one request and wait for its reply; None (worker killed) on timeout."""
        if not self.send(payload):
            return self._died()
        reply = self.read_line(timeout_s)
        if reply is None:
            if self.alive():
                self.stop()
                return None
            return self._died()
        return reply

    def _died(self) -> dict[str, Any]:
        """A worker that died mid-request failed that request; the next one gets a new worker."""
        self._proc.wait()
        message = f"dbt worker died (exit code {self.returncode()}): {self.stderr_tail()}"
        return {"success": False, "exception": message, "results": [], "worker_died": True}


if __name__ == "__main__":
    sys.exit(main())

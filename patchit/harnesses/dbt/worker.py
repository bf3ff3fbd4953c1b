"""A warm dbt process: `python -m patchit.harnesses.dbt.worker`.

Importing dbt costs seconds; a worker pays it once and then runs many invocations with
`dbtRunner`, each in a fork of itself (`patchit.harnesses.dbt.serve`): a run's writes are
confined to its own dirs there (`writable`, Landlock) and nothing it changes outlives it.
Protocol (one JSON object per line):

    stdin   {"args": [...], "cwd": "...", "env": {...}, "log_path": "...",
             "writable": [dir, ...] (optional), "id": int (optional),
             "saved_parse": {"source", "root", "file"} (optional, see saved_parse),
             "warehouse_gate": "..." (optional: the file the run's first connection waits
             for, see warehouse_gate)}
    reply   {"success": bool, "exception": str | null, "duration_ms": int,
             "results": [{"unique_id", "status", "message", "resource_type"}],
             "saved_parse_kept": bool (dbt read the worker's decoded parse),
             "parse": "partial" | "full" | "unknown" (how dbt parsed),
             "phases_ms": {phase: ms} (where the run's time went, see phases),
             "id": the request's id (when it had one)}

Requests run concurrently: the worker reads the next request while earlier ones run (each in
its own fork), and replies in the order they finish, each carrying its request's `id` (the
baseline of the data check runs beside the first candidate's verification this way).
`{"preload": true, "saved_parse": {...}}` runs nothing: the worker decodes that parse now
(an incident's, while its evidence is gathered) and replies `{"preloaded": true, "kept": bool}`.

Each request runs in its `cwd` (relative DuckDB paths resolve against it, as for the user's
dbt) and the worker returns to `/` afterwards. Replies go to the fd that was stdout when the
worker started; fds 1 and 2 are pointed at the request's log file while dbt runs (and at
/dev/null between requests), so nothing dbt or a C extension prints can corrupt the protocol.
The first line written is `{"ready": true, "pid": ..., "dbt_version": ...}` once dbt is
imported.

`python -m patchit.harnesses.dbt.worker --once` is a fresh process per run instead (the
harness's `warm=False`): it reads one request line, runs it in itself with the same changes to
dbt (`tuning`), writes its reply line and exits; no warm-up, nothing kept.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from patchit.harnesses.dbt import (
    phases as dbt_phases,
)
from patchit.harnesses.dbt import (
    saved_parse as dbt_saved_parse,
)
from patchit.harnesses.dbt import (
    tuning as dbt_tuning,
)
from patchit.harnesses.dbt import tuning_files, tuning_graph, tuning_schemas, warehouse_gate
from patchit.harnesses.dbt.protocol import (
    RUN_NODES_FILE,
    WARM_UP_PARSE_ENV,
    WARM_UP_SAVE_ENV,
)
from patchit.harnesses.dbt.serve import check_request, reply_line, serve
from patchit.intake.dbt_child import release_duckdb

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
_OWN_ENV = (
    WARM_UP_PARSE_ENV,
    WARM_UP_SAVE_ENV,
    tuning_schemas.SCHEMAS_ENV,
    tuning_schemas.SCHEMAS_SAVE_ENV,
)
_BASE_ENV = {k: v for k, v in os.environ.items() if k not in _OWN_ENV}


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


def _write_run_nodes(args: list[str], result: Any) -> None:
    """The run's result nodes as `{"nodes": {unique_id: node}}` in its `--target-path`."""
    if "--target-path" not in args[:-1]:
        return
    target = Path(args[args.index("--target-path") + 1])
    nodes: dict[str, Any] = {}
    for item in getattr(result, "results", None) or []:
        node = getattr(item, "node", None)
        if node is not None and hasattr(node, "to_dict"):
            with contextlib.suppress(Exception):  # a node dbt cannot serialise: left out
                nodes[str(node.unique_id)] = node.to_dict(omit_none=True)
    with contextlib.suppress(OSError):
        target.mkdir(parents=True, exist_ok=True)
        (target / RUN_NODES_FILE).write_text(json.dumps({"nodes": nodes}, default=str))


def run_request(request: dict[str, Any], stderr_fd: int, in_fork: bool = False) -> dict[str, Any]:
    """Run one request's dbt invocation in this process. `in_fork`: a fork of the worker that
    ends with the run; it leaves DuckDB's database as dbt's commits left it (checkpointing it
    on close cost 60 ms a run): the fork's exit releases the file before the harness hears of
    the run (`serve._reap`), and DuckDB replays its write-ahead log when the data check
    attaches the file. The worker's own runs (its warm-up) close it."""
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
    dbt_saved_parse.arm(request)
    warehouse_gate.arm(request)
    dbt_tuning.forget_parse_mode()
    tuning_files.forget()
    dbt_phases.reset()
    try:
        res = dbtRunner().invoke(list(request["args"]))
        with dbt_phases.timed("artifacts"):
            _write_run_nodes(list(request["args"]), res.result)
        exception = (
            None if res.exception is None else f"{type(res.exception).__name__}: {res.exception}"
        )
        reply: dict[str, Any] = {
            "success": bool(res.success),
            "exception": exception,
            "results": _collect_results(res.result),
            "saved_parse_kept": dbt_saved_parse.used(),
            "parse": dbt_tuning.parse_mode(),
            "files_from_saved": tuning_files.read_from_saved(),
            "graph_from_saved": tuning_graph.taken_last(),
            "phases_ms": dbt_phases.phases_ms(),
        }
    except (Exception, SystemExit) as exc:  # report it and keep serving the next request
        traceback.print_exc()
        reply = {"success": False, "exception": f"{type(exc).__name__}: {exc}", "results": []}
    finally:
        if not in_fork:
            release_duckdb()
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


def _prepare(request: dict[str, Any], settle: bool = True) -> dict[str, Any]:
    """Before a request's fork (or for a preload request): its saved parse decoded and kept
    (`settle`: see `saved_parse.preload`)."""
    dbt_saved_parse.preload(request, settle)
    spec = request.get("saved_parse")
    return {"kept": isinstance(spec, dict) and dbt_saved_parse.holds(spec)}


def _run_in_fork(request: dict[str, Any], stderr_fd: int) -> dict[str, Any]:
    return run_request(request, stderr_fd, in_fork=True)


_WARM_UP_SCHEMA = """\
version: 2
models:
  - name: warm_up
    columns:
      - name: id
        data_tests: [not_null, unique]
"""


def _warm_up(stderr_fd: int) -> None:
    """Build a tiny file-backed project twice, the second time after a model changed: dbt's
    first invocation in a process pays for lazily built JSON schemas and templates, and its
    first partial parse, table build and test pay again; none of that should land on the
    first candidate. The second build replaces a table that exists, as a candidate's run
    does (dbt compiles the macros of that path: grants copied, indexes dropped), and the
    model's tests compile the generic tests candidates run most (`not_null`, `unique`): a
    template compiled here is one no fork compiles again.

    Without a saved parse, the first build parses every macro of dbt and its adapter (most of
    the warm-up, and nothing a candidate's run needs: it starts from the user's saved parse).
    So the first build starts from the parse an earlier worker's warm-up left in patchit's
    cache (`WARM_UP_PARSE_ENV`, re-rooted here; dbt re-parses in full when it no longer
    matches, e.g. after an upgrade), and this one leaves its own at `WARM_UP_SAVE_ENV`."""
    from patchit.sandbox.snapshot import PARTIAL_PARSE_FILE, rebase_partial_parse

    with tempfile.TemporaryDirectory(prefix="patchit-dbt-warmup-") as tmp:
        root = Path(tmp)
        (root / "models").mkdir()
        cached = os.environ.get(WARM_UP_PARSE_ENV)  # read now: a run resets the environment
        save = os.environ.get(WARM_UP_SAVE_ENV)
        if cached and Path(cached).is_file():
            rebase_partial_parse(Path(cached), root / "target", root)
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
        mark = uuid.uuid4().hex  # the model always differs from the cached parse's
        for number in (1, 2):
            (root / "models" / "warm_up.sql").write_text(f"select {number} as id -- {mark}\n")
            reply = run_request(request, stderr_fd)
            if not reply["success"]:  # a cold first request is slower, not wrong: carry on
                print(f"patchit dbt worker: warm-up failed: {reply['exception']}", file=sys.stderr)
                return
        if save:
            with contextlib.suppress(OSError):  # a parse not saved costs the next worker time
                shutil.copyfile(root / "target" / PARTIAL_PARSE_FILE, save)


def once() -> int:
    """One request from stdin, run in this process; its reply on stdout."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    stderr_fd = os.dup(2)
    try:
        request = check_request(sys.stdin.buffer.readline())
        if request.get("preload") is True:
            raise ValueError("a preload request is for the warm worker; this one runs once")
    except ValueError as exc:
        reply_line(channel, {"success": False, "exception": f"bad request: {exc}", "results": []})
        return 2
    # The collector is off while dbt is imported and the parse decoded (it would walk what
    # they make again and again), and what they made is frozen: the run's collections walk
    # only what the run makes. A process that ends with its one run leaves the garbage be.
    gc.disable()
    importlib.import_module("dbt.cli.main")
    dbt_tuning.install()
    dbt_phases.install()
    if request.get(warehouse_gate.GATE_FIELD):  # a DuckDB run: its adapter is imported anyway
        warehouse_gate.install()
    tuning_schemas.load(os.environ.get(tuning_schemas.SCHEMAS_ENV))
    started = time.monotonic()
    spec = request.get("saved_parse")  # the failing run's parse as it is, re-rooted as read
    kept = isinstance(spec, dict) and _prepare(request, settle=False)["kept"]
    gc.freeze()
    gc.enable()
    if isinstance(spec, dict) and not kept:
        with contextlib.suppress(OSError):  # not decoded: dbt must not read it un-rooted
            os.unlink(str(spec.get("file")))
    decoded_ms = (time.monotonic() - started) * 1000
    # the process ends with the run: as a fork's, its DuckDB file is left to the exit
    reply = run_request(request, stderr_fd, in_fork=True)
    phases = reply.get("phases_ms")
    if isinstance(phases, dict):  # decoding the saved parse is dbt's reading of it
        phases["read parse"] = round(phases.get("read parse", 0.0) + decoded_ms, 1)
        reply["duration_ms"] = int(reply.get("duration_ms", 0) + decoded_ms)
    reply_line(channel, reply)
    channel.close()
    return 0


def main() -> int:
    if sys.argv[1:] == ["--once"]:
        return once()
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

    dbt_tuning.install()
    dbt_phases.install()
    warehouse_gate.install()
    tuning_schemas.load(os.environ.get(tuning_schemas.SCHEMAS_ENV))  # an earlier worker's
    save_schemas = os.environ.get(tuning_schemas.SCHEMAS_SAVE_ENV)  # now: a run resets it
    _warm_up(stderr_fd)
    tuning_schemas.make_common()  # before any run: nothing of a user's project ran here
    tuning_schemas.save(save_schemas)
    # What the worker holds now (dbt's modules, the warm-up's caches) is never collected
    # again: each run's collections traverse only what the run itself allocated.
    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads > 1:  # a fork would lack the other threads: say so in the worker's stderr
        print(f"patchit dbt worker: {threads} threads before forking requests", file=sys.stderr)
    dbt_version = importlib.metadata.version("dbt-core")
    reply_line(channel, {"ready": True, "pid": os.getpid(), "dbt_version": dbt_version})
    serve(channel, stderr_fd, _run_in_fork, prepare=_prepare)
    return 0


if __name__ == "__main__":
    sys.exit(main())

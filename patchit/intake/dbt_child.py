"""Run dbt in a child process exactly as the `dbt` command would, and record what failed.

`python -m patchit.intake.dbt_child OUT.json ARGS...` invokes dbt's own CLI through `dbtRunner`
(so dbt's output reaches the terminal unchanged) and writes this invocation's own results to
OUT.json: never a `run_results.json` left over from an earlier run. Exit code as `dbt`'s:
0 success, 1 a node failed, 2 dbt could not run (parse error, bad profile, ...).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from patchit.intake.dbt_child_env import FAILED_FD_ENV as FAILED_FD_ENV
from patchit.intake.dbt_child_env import INVOCATION_ENV as INVOCATION_ENV


def _node_fields(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    return {
        "unique_id": getattr(node, "unique_id", None),
        "name": getattr(node, "name", None),
        "resource_type": str(getattr(node, "resource_type", "") or ""),
        "original_file_path": getattr(node, "original_file_path", None),
        "package_name": getattr(node, "package_name", None),
        "compiled_code": getattr(node, "compiled_code", None),
        "relation_name": getattr(node, "relation_name", None),
    }


def _exception_fields(exc: BaseException) -> dict[str, Any]:
    node = getattr(exc, "node", None)
    return {
        "type": type(exc).__name__,
        "message": str(getattr(exc, "msg", None) or exc),
        "text": str(exc),
        "node": _node_fields(node) if node is not None and not isinstance(node, str) else {},
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def _write(out_path: Path, record: dict[str, Any]) -> None:
    tmp = out_path.with_suffix(".part")
    tmp.write_text(json.dumps(record, default=str), encoding="utf-8")
    tmp.replace(out_path)


def _dbt_cli(args: list[str]) -> int:
    from dbt.cli.main import cli

    try:
        cli.main(args=args, prog_name="dbt")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return 0


def _as_typed(args: list[str]) -> list[str]:
    """argv as the user typed it (`dbt build ...`): dbt records `sys.argv` as its command."""
    raw = os.environ.pop(INVOCATION_ENV, None)
    try:
        typed = json.loads(raw) if raw else None
    except ValueError:
        typed = None
    if isinstance(typed, list) and all(isinstance(a, str) for a in typed):
        return ["dbt", *typed]
    return ["dbt", *args]


def _failed_fd() -> int | None:
    """The fd `FAILED_FD_ENV` names (taken out of the environment dbt sees), or None."""
    raw = os.environ.pop(FAILED_FD_ENV, None)
    try:
        fd = int(raw) if raw else None
        if fd is not None:
            os.set_inheritable(fd, False)  # nothing dbt starts may hold the wrapper's pipe
    except (ValueError, OSError):
        return None
    return fd


def _import_spooling() -> None:
    with contextlib.suppress(Exception):  # spooling imports it again, and says what failed
        import patchit.intake.dbt
        import patchit.intake.spool  # noqa: F401


def _spool_first(ticket: dict[str, str], record: dict[str, Any], args: list[str]) -> None:
    """Spool the failures now, for the wrapper (`patchit.intake.dbt_spool`); never changes
    dbt's exit code: where it fails the wrapper spools them itself."""
    try:
        from patchit.intake.dbt_spool import spool_record

        record["spooled"] = spool_record(ticket, record, args)
    except Exception as exc:
        print(f"patchit: spooling the failures failed ({exc}); the wrapper will", file=sys.stderr)


def main(argv: list[str]) -> int:
    out_path = Path(argv[0])
    args = argv[1:]
    sys.argv = _as_typed(args)
    from patchit.intake.dbt_spool import take_ticket

    ticket = take_ticket()
    from dbt.cli.exceptions import DbtUsageException
    from dbt.cli.main import dbtRunner
    from dbt_common.events.base_types import EventMsg

    record: dict[str, Any] = {"invocation_id": None, "errors": [], "results": []}

    failed_fd = _failed_fd()
    tell = threading.Lock()
    # what spooling the failures loads (pydantic's event model: a second on a busy machine),
    # imported beside dbt from its first failed node on, not after it returns
    warming = threading.Thread(target=_import_spooling, name="patchit-warm-spool", daemon=True)

    def on_event(msg: EventMsg) -> None:
        nonlocal failed_fd
        if record["invocation_id"] is None:
            record["invocation_id"] = getattr(msg.info, "invocation_id", None)
        if msg.info.name == "MainEncounteredError":
            record["errors"].append(str(msg.data.exc))
        elif msg.info.name == "AdapterRegistered":  # `duckdb` and `=1.11.1`
            record["runtime"] = runtime_of(msg.data.adapter_name, msg.data.adapter_version)
        elif msg.info.name == "NodeFinished":
            status = str(getattr(getattr(msg.data, "run_result", None), "status", ""))
            if ticket is not None and status in ("error", "fail") and not warming.is_alive():
                with tell, contextlib.suppress(RuntimeError):  # started once
                    warming.start()
            if failed_fd is None or status != "error":
                return
            with tell:  # nodes finish in dbt's threads: the fd is written and closed once
                if failed_fd is not None:
                    with contextlib.suppress(OSError):  # the wrapper gone: nothing to tell
                        os.write(failed_fd, b"error\n")
                    with contextlib.suppress(OSError):
                        os.close(failed_fd)
                    failed_fd = None

    started = time.time()
    res = dbtRunner(callbacks=[on_event]).invoke(args)
    if isinstance(res.exception, DbtUsageException):
        # a usage error happens before dbt does anything: let dbt's own CLI print it, as
        # `dbt` would (usage text and error on stderr, exit 2), and record no failure
        record.update(success=False, usage_error=True, exception=None)
        _write(out_path, record)
        return _dbt_cli(args)
    record["duration_s"] = round(time.time() - started, 3)
    record["success"] = bool(res.success)
    record["exception"] = _exception_fields(res.exception) if res.exception else None
    results = getattr(res.result, "results", None) or []
    for r in results:
        record["results"].append(
            {
                **_node_fields(getattr(r, "node", None)),
                "status": str(getattr(r, "status", "")),
                "message": getattr(r, "message", None),
                "failures": getattr(r, "failures", None),
            }
        )
    if ticket is not None and not res.success:
        _spool_first(ticket, record, args)
    if res.success:  # what the last good build's sources looked like (`source_types`)
        from patchit.intake.source_types import duckdb_source_types, run_manifest

        types = duckdb_source_types(run_manifest(args, record["invocation_id"]))
        if types is not None:
            record["source_types"] = types
    _write(out_path, record)
    if res.success:
        return 0
    return 2 if res.exception is not None else 1


def runtime_of(adapter: str, version: str) -> str:
    """`dbt=1.11.16 duckdb=1.11.1`: what ran the project, kept with its last good commit so a
    failure after an upgrade of either is told from a code change."""
    from dbt.version import __version__

    return f"dbt={__version__} {adapter}={version.lstrip('=')}"


def release_duckdb() -> None:
    """dbt-duckdb keeps its database open in a class attribute after the run; close it so the
    candidate's DB copy is unlocked (and can be deleted) as soon as the request is done."""
    connections = sys.modules.get("dbt.adapters.duckdb.connections")  # loaded by a DuckDB run
    manager = getattr(connections, "DuckDBConnectionManager", None)
    if manager is None:
        return
    env = getattr(manager, "_ENV", None)
    if env is not None:
        try:
            env.close()
        except Exception as exc:  # the next request opens a fresh environment either way
            print(f"patchit: closing DuckDB failed: {exc}", file=sys.stderr)
        manager._ENV = None


def exit_now(code: int) -> NoReturn:
    """End the process with `code` once dbt is done: DuckDB closed (its file checkpointed, as
    an orderly exit would), the atexit handlers run, logging and the streams flushed; but the
    interpreter's teardown of dbt's hundreds of modules (half a second, before the wrapper
    can heal or exit) is skipped."""
    release_duckdb()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))

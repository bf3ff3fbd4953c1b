"""The warm dbt worker's serving loop: each request in its own fork, several at once.

The worker (`patchit.harnesses.dbt.worker`) reads request lines from stdin; each is run by
`run` in a fork of the worker (nothing a run does outlives it; with `writable`, Landlock
confines its writes first), and the worker reads the next line while it runs. Each reply is
written as its fork finishes, carrying its request's `id`: the parent matches them up. A
request `{"preload": true, ...}` runs nothing: the worker prepares what it names (`prepare`,
e.g. decodes a saved parse) and answers at once.

The worker is a child subreaper (`patchit.sandbox.reaper`): whatever a run daemonized comes
back to it. When no run is going any more, before the last reply, it kills those and removes
what the runs left in the private /tmp (where their Landlock rules let them write there), so
none of it is there for the next candidate. Runs overlap (a baseline beside a candidate), so
the sweep waits for the worker to be idle rather than guess whose an orphan is.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from patchit.sandbox.landlock import restrict_writes
from patchit.sandbox.reaper import (
    PRIVATE_TMP,
    become_subreaper,
    children,
    clear_new_entries,
    end_strays,
    entries,
)

Run = Callable[[dict[str, Any], int], dict[str, Any]]  # (request, stderr fd) -> reply
# In the worker, before a request's fork; what it returns joins a preload request's reply
Prepare = Callable[[dict[str, Any]], dict[str, Any] | None]


def reply_line(channel: TextIO, payload: dict[str, Any]) -> None:
    channel.write(json.dumps(payload) + "\n")
    channel.flush()


def check_request(line: bytes) -> dict[str, Any]:
    """One request line, parsed; ValueError says what is wrong with it."""
    request = json.loads(line)
    if isinstance(request, dict) and request.get("preload") is True:
        return request  # only the preparing (`prepare`), no run
    if not isinstance(request, dict) or not isinstance(request.get("args"), list):
        raise ValueError("a request is an object with an `args` list")
    if not request.get("cwd") or not request.get("log_path"):
        raise ValueError("a request needs `cwd` and `log_path`")
    return request


def serve(
    channel: TextIO, stderr_fd: int, run: Run, stdin_fd: int = 0, prepare: Prepare | None = None
) -> None:
    """Start each request line from `stdin_fd` in its own fork as it comes, and reply to each
    (with its `id`) as its fork finishes; return at the end of stdin once every run is done.
    `prepare` runs in the worker itself before each fork (what it keeps, every fork shares)."""
    selector = selectors.DefaultSelector()
    selector.register(stdin_fd, selectors.EVENT_READ)
    running: dict[int, tuple[int, dict[str, Any], list[bytes]]] = {}  # read fd -> run
    pending, open_input = b"", True
    become_subreaper()  # a run's daemonized process comes back here to be ended
    own = children()  # none of them a run's
    tmp_before: set[str] | None = None  # the private /tmp before the runs now going
    while open_input or running:
        for key, _ in selector.select():
            fd = int(key.fd)
            chunk = os.read(fd, 65536)
            if fd == stdin_fd:
                if not chunk:
                    open_input = False
                    selector.unregister(fd)
                    continue
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if line.strip():
                        if not running:
                            tmp_before = entries(PRIVATE_TMP)
                        started = _start(line, channel, stderr_fd, run, prepare)
                        if started is not None:
                            running[started[0]] = started[1]
                            selector.register(started[0], selectors.EVENT_READ)
            elif chunk:
                running[fd][2].append(chunk)
            else:
                selector.unregister(fd)
                os.close(fd)
                pid, request, chunks = running.pop(fd)
                reply = _with_id(_reap(pid, b"".join(chunks)), request)
                if not running:  # what the runs left goes before the last one's reply
                    _end_runs(own, tmp_before if _writes_tmp(request) else None)
                reply_line(channel, reply)


def _writes_tmp(request: dict[str, Any]) -> bool:
    """The run's fork may write the sandbox's private /tmp (it is among its Landlock dirs,
    which a request names only inside bubblewrap)."""
    return str(PRIVATE_TMP) in (request.get("writable") or [])


def _end_runs(own: set[int], tmp_before: set[str] | None) -> None:
    """No run going: end every process the runs left (re-parented here) and, where they
    could write it, empty the private /tmp of what they left."""
    end_strays(keep=own)
    if tmp_before is not None:
        clear_new_entries(PRIVATE_TMP, tmp_before)


def _with_id(reply: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    return {**reply, "id": request["id"]} if "id" in request else reply


def _start(
    line: bytes, channel: TextIO, stderr_fd: int, run: Run, prepare: Prepare | None = None
) -> tuple[int, tuple[int, dict[str, Any], list[bytes]]] | None:
    """Fork the run of one request line: (its reply pipe's fd, (pid, request, chunks)); a bad
    line is answered at once (None)."""
    try:
        request = check_request(line)
    except ValueError as exc:
        reply = {"success": False, "exception": f"bad request: {exc}", "results": []}
        with contextlib.suppress(ValueError):
            reply = _with_id(reply, json.loads(line))
        reply_line(channel, reply)
        return None
    prepared = prepare(request) if prepare is not None else None
    if request.get("preload") is True:  # what the next runs will want, kept: answered at once
        reply_line(channel, _with_id({"preloaded": True, **(prepared or {})}, request))
        return None
    pid, read_fd = _fork_run(request, stderr_fd, run)
    return read_fd, (pid, request, [])


def _fork_run(request: dict[str, Any], stderr_fd: int, run: Run) -> tuple[int, int]:
    """Fork a run of `request`: nothing the run does (its environment, imports, globals)
    survives it, and with `writable` in the request its writes are confined to those dirs
    (Landlock) before dbt reads the project. Returns (pid, fd its JSON reply comes on)."""
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
                reply = run(request, stderr_fd)
            with os.fdopen(write_fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(reply))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _reap(pid: int, data: bytes) -> dict[str, Any]:
    """Wait for the run's fork; its reply, or why it gave none."""
    _, status = os.waitpid(pid, 0)
    try:
        answer: dict[str, Any] = json.loads(data)
        return answer
    except ValueError:
        how = os.waitstatus_to_exitcode(status)
        ended = f"signal {-how}" if how < 0 else f"exit {how}"
        return {"success": False, "results": [], "exception": f"the dbt run died ({ended})"}

"""The warm dbt worker runs requests concurrently and answers each by its id (no dbt here: the
run of a request is replaced by a stand-in; the parent talks to a stand-in child)."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from patchit.harnesses.dbt import serve as dbt_serve
from patchit.harnesses.dbt.worker_handle import WarmDbtWorker
from patchit.sandbox.isolation import Sandbox

# A child that answers its two requests in the reverse order, each with its id.
_REVERSING_CHILD = r"""
import json, sys
print(json.dumps({"ready": True}), flush=True)
first = json.loads(sys.stdin.readline())
second = json.loads(sys.stdin.readline())
for request in (second, first):
    print(json.dumps({"id": request["id"], "success": True, "results": [],
                      "echo": request["args"][0]}), flush=True)
sys.stdin.readline()
"""


def _plain() -> Sandbox:
    return Sandbox(kind="subprocess", network=True, memory_mb=4096, writable=())


def test_two_threads_each_get_the_reply_to_their_own_request() -> None:
    worker = WarmDbtWorker([sys.executable, "-c", _REVERSING_CHILD], _plain(), dict(os.environ))
    try:
        worker.wait_ready(30)
        replies: dict[str, Any] = {}

        def ask(name: str) -> None:
            replies[name] = worker.request({"args": [name]}, 30)

        threads = [threading.Thread(target=ask, args=(n,)) for n in ("first", "second")]
        for thread in threads:
            thread.start()
            time.sleep(0.2)  # "first" is sent first; the child answers "second" first
        for thread in threads:
            thread.join(30)
        assert {n: r["echo"] for n, r in replies.items()} == {"first": "first", "second": "second"}
    finally:
        worker.stop()


def test_a_request_that_times_out_kills_the_worker_and_says_none() -> None:
    silent = (
        "import json; print(json.dumps({'ready': True}), flush=True); import time; time.sleep(60)"
    )
    worker = WarmDbtWorker([sys.executable, "-c", silent], _plain(), dict(os.environ))
    try:
        worker.wait_ready(30)
        assert worker.request({"args": ["x"]}, 0.5) is None
        assert not worker.alive()
    finally:
        worker.stop()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker forks each run")
def test_the_worker_serves_a_request_while_an_earlier_one_still_runs(tmp_path: Path) -> None:
    def stand_in(request: dict[str, Any], stderr_fd: int) -> dict[str, Any]:
        time.sleep(float(request["args"][0]))
        return {"success": True, "exception": None, "results": [], "slept": request["args"][0]}

    read_fd, write_fd = os.pipe()
    lines = [
        {"args": ["1.0"], "cwd": str(tmp_path), "log_path": "x", "id": 1},
        {"args": ["0.0"], "cwd": str(tmp_path), "log_path": "x", "id": 2},
        {"args": "not a list", "id": 3},
    ]
    os.write(write_fd, "".join(json.dumps(line) + "\n" for line in lines).encode())
    os.close(write_fd)
    channel = io.StringIO()
    dbt_serve.serve(channel, os.dup(2), stand_in, stdin_fd=read_fd)
    os.close(read_fd)
    replies = [json.loads(line) for line in channel.getvalue().splitlines()]
    # the bad line is answered at once, the quick run before the slow one it came after
    assert [r["id"] for r in replies] == [3, 2, 1]
    assert "bad request" in replies[0]["exception"]
    assert [r.get("slept") for r in replies[1:]] == ["0.0", "1.0"]


def test_what_prepare_keeps_in_the_worker_every_later_run_sees(tmp_path: Path) -> None:
    """`prepare` runs in the worker before each fork: what it keeps outlives the runs (the
    failing run's decoded parse), what a run changes does not."""
    kept: dict[str, int] = {}

    def prepare(request: dict[str, Any]) -> None:
        kept[request["args"][0]] = kept.get(request["args"][0], 0) + 1

    def stand_in(request: dict[str, Any], stderr_fd: int) -> dict[str, Any]:
        seen = dict(kept)
        kept.clear()  # in the fork: gone with it
        return {"success": True, "exception": None, "results": [], "seen": seen}

    read_fd, write_fd = os.pipe()
    lines = [
        {"args": [name], "cwd": str(tmp_path), "log_path": "x", "id": number}
        for number, name in enumerate(["a", "a", "b"], start=1)
    ]
    os.write(write_fd, "".join(json.dumps(line) + "\n" for line in lines).encode())
    os.close(write_fd)
    channel = io.StringIO()
    dbt_serve.serve(channel, os.dup(2), stand_in, stdin_fd=read_fd, prepare=prepare)
    os.close(read_fd)
    seen = {r["id"]: r["seen"] for r in map(json.loads, channel.getvalue().splitlines())}
    assert seen == {1: {"a": 1}, 2: {"a": 2}, 3: {"a": 2, "b": 1}}
    assert kept == {"a": 2, "b": 1}


def test_a_preload_request_prepares_and_runs_nothing(tmp_path: Path) -> None:
    """`{"preload": true}`: `prepare` runs in the worker and its answer is the reply, at once;
    no fork, no run; the next request's run sees what it kept."""
    kept: list[str] = []

    def prepare(request: dict[str, Any]) -> dict[str, Any]:
        kept.append(str(request.get("saved_parse")))
        return {"kept": True}

    def stand_in(request: dict[str, Any], stderr_fd: int) -> dict[str, Any]:
        return {"success": True, "exception": None, "results": [], "seen": list(kept)}

    read_fd, write_fd = os.pipe()
    lines = [{"preload": True, "saved_parse": "p", "id": 1},
             {"args": ["a"], "cwd": str(tmp_path), "log_path": "x", "id": 2}]  # fmt: skip
    os.write(write_fd, "".join(json.dumps(line) + "\n" for line in lines).encode())
    os.close(write_fd)
    channel = io.StringIO()
    dbt_serve.serve(channel, os.dup(2), stand_in, stdin_fd=read_fd, prepare=prepare)
    os.close(read_fd)
    replies = [json.loads(line) for line in channel.getvalue().splitlines()]
    assert replies[0] == {"preloaded": True, "kept": True, "id": 1}
    assert replies[1]["id"] == 2 and replies[1]["seen"] == ["p", "None"]

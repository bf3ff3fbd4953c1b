"""How the wrapper waits for dbt's first error (no dbt: a shell stands in for the child)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from patchit.intake.dbt_run import _await_error


def _child(argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    told, tell = os.pipe()
    proc = subprocess.Popen([a.replace("FD", str(tell)) for a in argv], pass_fds=(tell,))
    os.close(tell)
    return proc, told


def test_the_first_error_is_reported_while_the_child_still_runs() -> None:
    code = "import os, time; os.write(FD, b'error\\n'); time.sleep(3)"
    proc, told = _child([sys.executable, "-c", code])
    called: list[float] = []
    started = time.monotonic()
    _await_error(proc, told, lambda: called.append(time.monotonic()))
    assert len(called) == 1 and called[0] - started < 2.0
    assert proc.poll() is None  # dbt goes on
    proc.kill()
    proc.wait()
    os.close(told)


def test_a_child_that_exits_ends_the_wait_even_if_a_grandchild_holds_the_pipe() -> None:
    proc, told = _child(
        ["sh", "-c", "sleep 5 & exit 0"]
    )  # the background sleep keeps the write end
    called: list[float] = []
    started = time.monotonic()
    _await_error(proc, told, lambda: called.append(time.monotonic()))
    assert time.monotonic() - started < 2.0
    assert called == []
    os.close(told)

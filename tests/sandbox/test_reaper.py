"""patchit.sandbox.reaper: a warm runtime ends what a candidate daemonized, and empties what it
left in the private /tmp. Real processes: a runtime stand-in (a Python child made subreaper)
whose job double-forks and calls setsid, as a daemon does; the host then looks for it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.sandbox.isolation import Sandbox
from patchit.sandbox.reaper import clear_new_entries, entries

# The runtime: subreaper, then a job (a fork) that starts a daemon and exits; then, when
# asked, end_strays. It prints how many it killed, then waits to be stopped.
RUNTIME = """
import os, subprocess, sys, time
from patchit.sandbox.reaper import become_subreaper, children, end_strays
assert become_subreaper()
own = children()
pid = os.fork()
if pid == 0:
    daemon = "import os, time\\nif os.fork():\\n    os._exit(0)\\nos.setsid()\\ntime.sleep(600)"
    subprocess.Popen([sys.executable, "-c", daemon, sys.argv[1]], start_new_session=True)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.5)  # the daemon's parent exits: it is re-parented here
print(end_strays(keep=own) if sys.argv[2] == "end" else 0, flush=True)
sys.stdin.read()
"""


def _marked(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if marker.encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _run_job(end: bool) -> tuple[str, list[int]]:
    """(what the runtime printed, the daemon's pids while the runtime still lives)."""
    marker = f"patchit-daemon-{uuid.uuid4().hex[:12]}"
    runtime = subprocess.Popen(
        [sys.executable, "-c", RUNTIME, marker, "end" if end else "keep"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert runtime.stdout is not None
        printed = runtime.stdout.readline().strip()
        time.sleep(0.2)
        return printed, [pid for pid in _marked(marker) if pid != runtime.pid]
    finally:
        runtime.kill()
        for pid in _marked(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        runtime.wait()


def test_a_daemonized_process_is_ended_after_the_job() -> None:
    printed, alive = _run_job(end=True)
    assert alive == []
    assert int(printed) >= 1  # the daemon, re-parented to the runtime


def test_without_the_sweep_the_daemon_outlives_its_job() -> None:
    """The control: the same job leaves its daemon running (so the test above can fail)."""
    _, alive = _run_job(end=False)
    assert len(alive) == 1


def test_only_what_the_job_left_in_tmp_is_removed(tmp_path: Path) -> None:
    (tmp_path / "runtime.sock").write_text("")
    (tmp_path / "kept").mkdir()
    before = entries(tmp_path)
    (tmp_path / "left.txt").write_text("x")
    (tmp_path / "left-dir" / "deep").mkdir(parents=True)
    os.symlink("/etc", tmp_path / "left-link")
    clear_new_entries(tmp_path, before)
    assert sorted(os.listdir(tmp_path)) == ["kept", "runtime.sock"]
    assert Path("/etc").is_dir()  # a link is removed, never followed


@pytest.mark.parametrize("narrows", [True, False])
def test_a_landlock_refusal_is_a_write_limit_only_where_a_fork_was_narrowed(
    narrows: bool,
) -> None:
    box = Sandbox(kind="bubblewrap", network=False, memory_mb=SandboxConfig().memory_mb,
                  writable=(), narrows=narrows)  # fmt: skip
    output = "PermissionError: [Errno 13] Permission denied: '/var/tmp/other/x'"
    assert box.limit_in(output) == ("write" if narrows else None)

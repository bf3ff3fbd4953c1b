"""Process plumbing shared by the warm dbt worker and the warm Airflow parent (and the fresh
runs): spawn in a sandbox, JSON lines over the pipes, a stderr tail, kill the process group.

Every child starts in its own session (`start_new_session=True`), so killing its process
group on a timeout kills bwrap; under bubblewrap `--die-with-parent` and the pid namespace
then take every process inside with it (a plain child's group holds what it spawned that
stayed in the group). The sandbox's memory limit is set in `preexec_fn` before bwrap (or the
plain child) is executed. A child never inherits patchit's environment: without an `env`, it
gets the allowlisted part of it (`allowed_env`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from typing import IO, Any, ClassVar

from patchit.errors import HarnessError
from patchit.harnesses.jsonlines import JsonLineReader
from patchit.sandbox.isolation import Sandbox, allowed_env


def _children(pids: set[int]) -> set[int]:
    """Pids whose parent is in `pids` (one scan of /proc)."""
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) in pids:
            found.add(int(entry.name))
    return found


def _signal_tree(pid: int) -> None:
    """SIGKILL `pid`'s process group, and every process below `pid`, wherever its session.

    bubblewrap's sandboxed child starts its own session (`--new-session`) and only asks to die
    with bwrap (`--die-with-parent`) once it is set up: bwrap killed in the first milliseconds
    would leave it running, outside the group and holding the pipes (seen: a worker killed
    20 ms after its spawn went on to import dbt and answer 8 s later). So bwrap is stopped
    first (a stopped process forks no more), everything below it is collected and killed, the
    pid namespace's init among it (which takes the whole namespace with it), then bwrap."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGSTOP)
    tree: set[int] = set()
    frontier = {pid}
    try:
        while frontier:
            frontier = _children(frontier) - tree
            tree |= frontier
    except OSError:  # no /proc to list (not Linux, or masked): the group alone, as before
        pass
    for child in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_process_group(proc: subprocess.Popen[Any]) -> None:
    """Kill a child started with start_new_session=True and everything it spawned."""
    if proc.returncode is None:  # once reaped, its pid may name another process
        _signal_tree(proc.pid)
    proc.wait()


def popen_sandboxed(argv: list[str], sandbox: Sandbox, **kwargs: Any) -> subprocess.Popen[bytes]:
    """`Popen(argv)` inside `sandbox`, in a new session, with its limits applied."""
    if kwargs.get("env") is None:
        kwargs["env"] = allowed_env(os.environ)
    return subprocess.Popen(
        sandbox.wrap(argv), preexec_fn=sandbox.preexec(), start_new_session=True, **kwargs
    )


class WarmProcess:
    """A long-lived child speaking JSON lines: requests on stdin, replies on stdout; its
    stderr goes to a temp file whose tail explains a failed start or a death."""

    label: ClassVar[str] = "warm process"

    def __init__(
        self,
        argv: list[str],
        sandbox: Sandbox,
        env: dict[str, str],
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - lives with the child
        self._proc = popen_sandboxed(
            argv, sandbox, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, env=env, cwd=cwd,
        )  # fmt: skip
        assert self._proc.stdout is not None
        self._lines = JsonLineReader(self._proc.stdout)
        self.pid = self._proc.pid
        self._ready: dict[str, Any] | None = None

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """The child's first line, `{"ready": true, ...}` (read once; later calls return it);
        HarnessError if it never comes."""
        if self._ready is not None:
            return self._ready
        ready = self.read_line(timeout_s)
        if ready is None or not ready.get("ready"):
            tail = self.stderr_tail()  # before stop() closes the file
            self.stop()
            where = self.sandbox.describe()
            raise HarnessError(f"the {self.label} did not start ({where}): {tail}")
        self._ready = ready
        return ready

    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, payload: dict[str, Any]) -> bool:
        """Write one request line; False if the child's stdin is gone."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(payload).encode("utf-8") + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            return False
        return True

    def read_line(self, timeout_s: float) -> dict[str, Any] | None:
        """One JSON line from the child, or None on timeout or end of stream."""
        return self._lines.read(timeout_s)

    @property
    def starting(self) -> bool:
        """Spawned, and its ready line not read yet."""
        return self._ready is None

    def kill(self) -> None:
        """Kill the child's process group now, from any thread; whoever reads its pipes sees
        them end, and `stop()` (by the thread that owns it) reaps it."""
        if self._proc.returncode is not None:
            return  # reaped already: its pid may name another process by now
        _signal_tree(self._proc.pid)

    def stop(self) -> None:
        if self.alive():
            kill_process_group(self._proc)
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()

    def returncode(self) -> int | None:
        return self._proc.poll()

    def stderr_tail(self, max_chars: int = 4000) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return "(no stderr)"
        return text[-max_chars:].strip() or f"(exit code {self._proc.poll()})"

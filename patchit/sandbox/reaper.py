"""No process of a candidate outlives its job, and nothing it left in the private /tmp either.

A warm runtime (the Airflow parent, the dbt worker) runs each candidate in a fork of itself
and lives on for the next one, inside one bubblewrap sandbox: its pid namespace ends only
with the runtime. A candidate that daemonizes (fork, `setsid`, fork again) leaves a process
that the namespace would keep alive beside the next candidates, holding what it opened and
free to write what its Landlock rules allow, until the runtime stops. So the runtime makes
itself a child subreaper (`become_subreaper`): every orphan of its forks, however deep or in
whatever session, is re-parented to it rather than to the namespace's init, and after the job
`end_strays` kills each of its children that is not a job still running, with everything
below it, and reaps them.

The private /tmp is the runtime's bubblewrap tmpfs, shared by its forks: where a fork may
write it, `clear_new_entries` removes what appeared in it during the job, so the next
candidate starts from the /tmp the runtime started with. It is never called on a /tmp the
sandbox does not own (a plain subprocess sees the host's).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
from collections.abc import Iterable
from pathlib import Path

PRIVATE_TMP = Path("/tmp")  # inside the sandbox: bubblewrap's tmpfs, the runtime's own

_PR_SET_CHILD_SUBREAPER = 36
MAX_ROUNDS = 50  # a tree that keeps forking while it is killed gets this many sweeps


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented to it; False where the kernel
    cannot (not Linux): then only the pid namespace's end collects them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every visible process (one scan of /proc)."""
    found: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        found[int(entry.name)] = int(fields[1])
    return found


def children() -> set[int]:
    """This process's children (zombies included)."""
    me = os.getpid()
    try:
        return {pid for pid, parent in _parents().items() if parent == me}
    except OSError:
        return set()


def end_strays(keep: Iterable[int] = ()) -> int:
    """Kill every child of this process not in `keep` and everything below it, and reap them;
    sweep again while orphans keep arriving. Returns how many processes were killed."""
    kept = set(keep)
    me = os.getpid()
    killed = 0
    for _ in range(MAX_ROUNDS):
        try:
            parents = _parents()
        except OSError:
            return killed  # no /proc: nothing to find them by
        strays = {pid for pid, parent in parents.items() if parent == me and pid not in kept}
        if not strays:
            return killed
        tree, frontier = set(strays), set(strays)
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
            tree |= frontier
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += len(tree)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return killed


def entries(directory: Path) -> set[str]:
    """The names in `directory` (empty if it cannot be listed)."""
    try:
        return set(os.listdir(directory))
    except OSError:
        return set()


def clear_new_entries(directory: Path, before: set[str]) -> None:
    """Remove what is in `directory` now and was not in `before` (the job's leftovers)."""
    for name in entries(directory) - before:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()

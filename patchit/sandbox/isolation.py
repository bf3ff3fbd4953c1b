"""Isolation for harness runs: bubblewrap where it works, else a plain subprocess with limits.

Under bubblewrap the whole root is mounted read-only, `/tmp` is a private tmpfs, only the
given writable dirs (patchit's worktrees, sandboxes and cache) are bound read-write, and the
network namespace is empty unless the config asks for network. Both kinds get a memory limit
(`RLIMIT_AS`, set in `preexec`) and the harness's own time limit. Which one ran is part of
every verification (`describe`), so a report never claims isolation that was not there.

A limit the child ran into shows up in its output as an ordinary error (MemoryError,
"Network is unreachable", "Read-only file system"); `detect_limit` names it so the loop can
record the attempt as `harness_limit` instead of a failed candidate.
"""

from __future__ import annotations

import functools
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from patchit.config import SandboxConfig, resolve_home
from patchit.errors import HarnessError

PRIVATE_TMP = Path("/tmp")
PROBE_TIMEOUT_S = 20.0
_MB = 1024 * 1024

# Checked in this order: running out of memory can surface as any other error too.
_LIMIT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "memory",
        re.compile(
            r"\bMemoryError\b|Out of Memory Error|Cannot allocate memory|std::bad_alloc|\bENOMEM\b"
        ),
    ),
    (
        "network",
        re.compile(
            r"Network is unreachable|\bENETUNREACH\b|\[Errno 101\]"
            r"|Temporary failure in name resolution|Name or service not known"
            r"|No address associated with hostname|\[Errno -[235]\]"
            r"|Connection refused|\bECONNREFUSED\b|\[Errno 111\]"
        ),
    ),
    ("write", re.compile(r"Read-only file system|\bEROFS\b|\[Errno 30\]")),
)


def detect_limit(output: str) -> str | None:
    """ "memory" | "network" | "write" when the output shows the child hit a sandbox limit.

    Pure text matching: the caller decides whether the sandbox could have caused it (see
    `Sandbox.limit_in`, which ignores network errors when the network was allowed).
    """
    for limit, pattern in _LIMIT_PATTERNS:
        if pattern.search(output):
            return limit
    return None


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


@dataclass(frozen=True)
class Sandbox:
    """How one harness process is isolated. Frozen: a warm process keeps the sandbox it was
    started in, and a harness restarts it when a workspace needs another one (`covers`)."""

    kind: str  # "bubblewrap" | "subprocess"
    network: bool  # the config allows the network (only bubblewrap can take it away)
    memory_mb: int
    writable: tuple[Path, ...]
    # Dirs under the private /tmp the child must still see (read-only): the interpreter and
    # patchit itself when they were installed there.
    readable: tuple[Path, ...] = ()
    note: str = ""  # why this kind ran, when it is not the one asked for

    @property
    def blocks_network(self) -> bool:
        return self.kind == "bubblewrap" and not self.network

    @property
    def confines_writes(self) -> bool:
        return self.kind == "bubblewrap"

    def covers(self, *paths: Path) -> bool:
        """True if every path may be written inside this sandbox."""
        if not self.confines_writes:
            return True
        return all(any(_within(Path(p).resolve(), root) for root in self.writable) for p in paths)

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that runs `argv` in this sandbox (unchanged for a subprocess).

        No `--new-session` and no pid namespace: the child stays in bwrap's process group, so
        killing that group on a timeout kills both, and pids the child reports (the Airflow
        parent's forks) are valid outside. `--die-with-parent` ends the child with patchit.
        """
        if self.kind != "bubblewrap":
            return list(argv)
        prefix = [bwrap_path() or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev"]
        prefix += ["--proc", "/proc", "--tmpfs", str(PRIVATE_TMP), "--die-with-parent"]
        if not self.network:
            prefix.append("--unshare-net")
        for path in self.readable:
            prefix += ["--ro-bind", str(path), str(path)]
        for path in self.writable:
            prefix += ["--bind", str(path), str(path)]
        prefix += ["--setenv", "TMPDIR", str(PRIVATE_TMP)]
        return [*prefix, "--", *argv]

    def preexec(self) -> Callable[[], None]:
        """For `Popen(preexec_fn=...)`: the address-space limit (inherited by bwrap's child and
        every fork of it) and no core dumps."""
        limit = self.memory_mb * _MB

        def apply_limits() -> None:
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        return apply_limits

    def describe(self) -> str:
        """One line for the report: what isolated the run and how."""
        if self.kind == "bubblewrap":
            net = "network allowed" if self.network else "no network"
            text = f"bubblewrap ({net}, {self.memory_mb} MB, private /tmp)"
        else:
            net = "network allowed" if self.network else "network not blocked"
            text = f"subprocess ({self.memory_mb} MB; {net}, writes not confined)"
        return f"{text}: {self.note}" if self.note else text

    def limit_in(self, output: str) -> str | None:
        """`detect_limit`, keeping only limits this sandbox can impose."""
        limit = detect_limit(output)
        if limit == "network" and not self.blocks_network:
            return None
        if limit == "write" and not self.confines_writes:
            return None
        return limit


def patchit_areas(*extra: Path) -> list[Path]:
    """What a warm harness process may write: patchit's worktrees, sandboxes and cache under
    the current `$PATCHIT_HOME` (never the user's repo or database), plus `extra`."""
    home = resolve_home()
    return [home / "worktrees", home / "sandboxes", home / "cache", *extra]


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def bubblewrap_problem() -> str | None:
    """None if bubblewrap can build our sandbox here (probed once per process), else why not."""
    path = bwrap_path()
    if path is None:
        return "bwrap is not installed"
    probe = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    probe += ["--tmpfs", "/tmp", "--unshare-net", "--die-with-parent", "--", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    if proc.returncode != 0:
        return f"bwrap failed: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return None


def _needed_under_tmp(writable: tuple[Path, ...]) -> tuple[Path, ...]:
    """What the child must read that the private /tmp would hide: the venv, the interpreter,
    patchit's own package and sys.path entries living under /tmp."""
    import patchit

    candidates = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent]
    candidates += [Path(patchit.__file__).parent.parent]
    candidates += [Path(entry) for entry in sys.path if entry]
    found: list[Path] = []
    for path in candidates:
        try:
            path = path.resolve()
        except OSError:
            continue
        if not path.is_dir() or not _within(path, PRIVATE_TMP) or path == PRIVATE_TMP:
            continue
        if any(_within(path, root) for root in (*writable, *found)):
            continue
        found = [p for p in found if not _within(p, path)] + [path]
    return tuple(found)


def make_sandbox(cfg: SandboxConfig, writable: Iterable[Path]) -> Sandbox:
    """The sandbox the config asks for; `auto` is bubblewrap if it works, else a subprocess.

    The writable dirs are created (bwrap can only bind what exists) and resolved.
    """
    roots: list[Path] = []
    for path in writable:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        path = path.resolve()
        if not any(_within(path, root) for root in roots):
            roots = [r for r in roots if not _within(r, path)] + [path]
    dirs = tuple(roots)
    kind, note = "subprocess", ""
    if cfg.isolation != "subprocess":
        problem = bubblewrap_problem()
        if problem is None:
            kind = "bubblewrap"
        elif cfg.isolation == "bubblewrap":
            raise HarnessError(
                f"sandbox.isolation is 'bubblewrap' but {problem}; install bubblewrap "
                '(apt-get install bubblewrap) or set isolation = "auto" in .patchit.toml'
            )
        else:
            note = problem
    readable = _needed_under_tmp(dirs) if kind == "bubblewrap" else ()
    return Sandbox(
        kind=kind,
        network=cfg.network,
        memory_mb=cfg.memory_mb,
        writable=dirs,
        readable=readable,
        note=note,
    )

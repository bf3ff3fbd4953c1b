"""Isolation for harness runs: bubblewrap where it works, else a plain subprocess with limits.

Under bubblewrap, as root or not, the child gets (each layer where this machine supports it,
probed once per process by `bubblewrap_enforcement`):

- its own user namespace and no capabilities (`--unshare-user --cap-drop ALL`): it cannot
  mount, remount or unmount anything, so the read-only root stays read-only;
- its own pid namespace with a fresh `/proc` (`--unshare-pid`): host processes are neither
  visible nor signalable, and their `/proc/<pid>/environ` is out of reach;
- no network (an empty network namespace) unless the config allows it, and its own IPC
  namespace and session (`--new-session`: no terminal to inject keystrokes into);
- the host's secrets hidden: `/etc/shadow` and friends, ssh host keys, `/root`, `/home`, other
  users' homes, `/run` (daemon sockets) and `$PATCHIT_HOME` (memory, spool, other incidents)
  are covered by empty tmpfs or `/dev/null`; only what the run needs is bound back (the
  interpreter and patchit itself, the shared cache read-only, the writable dirs);
- the whole root read-only and `/tmp` private: it writes only in the given writable dirs; a
  warm runtime's sandbox (`warm=True`) binds every candidate's dirs, and each candidate's
  fork narrows its writes to its own with Landlock (`patchit.sandbox.landlock`).

The environment is never passed whole (`allowed_env`): the harness builds it from an allowlist
(PATH, HOME set to scratch, locale, TZ, PYTHON*, the runtime's own DBT_* or AIRFLOW__*
settings) plus the variables the unit's code references (`patchit.sandbox.envrefs`). Both
kinds get a memory limit (`RLIMIT_AS`, set in `preexec`) and the harness's own time limit.

Which layers held is part of every verification (`describe`): a layer this machine cannot
provide is named as not enforced, with the reason, so a report never claims isolation that
was not there.

A limit the child ran into shows up in its output as an ordinary error (MemoryError,
"Network is unreachable", "Read-only file system"); `detect_limit` names it so the loop can
record the attempt as `harness_limit` instead of a failed candidate.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import pwd
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from patchit.config import SandboxConfig, resolve_home
from patchit.errors import HarnessError
from patchit.sandbox.reaper import PRIVATE_TMP as PRIVATE_TMP

# What a warm runtime (one process serving many candidates) may write, for the report: each
# candidate's fork is narrowed to its own dirs with Landlock where the kernel has it.
WARM_WRITES = "patchit's worktrees and sandboxes"
NARROWED_WRITES = "its worktree and scratch (landlock per candidate)"
PER_CANDIDATE = "per-candidate writes"
PROBE_TIMEOUT_S = 20.0
_MB = 1024 * 1024

# The layers bubblewrap can add to its base sandbox, as the report names them.
USER_NS, NO_CAPS, PID_NS = "user ns", "no caps", "pid ns"
_LAYER_ARGS: dict[str, tuple[str, ...]] = {
    USER_NS: ("--unshare-user",),
    NO_CAPS: ("--cap-drop", "ALL"),
    PID_NS: ("--unshare-pid",),
}
_BASE_ARGS = ("--die-with-parent", "--new-session", "--unshare-ipc")

# Host files holding secrets: covered by /dev/null in the sandbox (globs).
SECRET_FILES = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
    "/etc/security/opasswd", "/etc/ssh/ssh_host_*_key",
)  # fmt: skip
# Host dirs holding secrets or daemons' sockets: covered by an empty tmpfs.
SECRET_DIRS = ("/root", "/home", "/run", "/etc/ssl/private", "/etc/sudoers.d", "/var/backups")
# Other users' homes (from the passwd database) are hidden when they live under these.
_HOME_PARENTS = frozenset({"home", "root", "var", "srv", "opt", "mnt", "media"})
_NEVER_HIDDEN = frozenset({Path("/"), Path("/var"), Path("/var/tmp"), Path("/tmp"), Path("/opt")})

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


# How a write Landlock refused shows (EACCES): a limit only where a fork was narrowed.
_LANDLOCK_DENIED = re.compile(r"PermissionError: \[Errno 13\]|\bEACCES\b")


def detect_limit(output: str, error: str | None = None) -> str | None:
    """ "memory" | "network" | "write" when the output shows the child hit a sandbox limit;
    the network only when `error` (the failure's own error, where given) says so.

    Pure text matching: the caller decides whether the sandbox could have caused it (see
    `Sandbox.limit_in`, which ignores network errors when the network was allowed).
    """
    for limit, pattern in _LIMIT_PATTERNS:
        if pattern.search(error if limit == "network" and error is not None else output):
            return limit
    return None


_TRACEBACK = "Traceback (most recent call last):"


def failure_error(output: str) -> str:
    """The failure's own error in a run's output: the exception that ended its last Python
    traceback (up to a blank line, at most 5 lines), else its last 3 lines. A line logged on
    the way (a retry warning quoting "Connection refused") is not the failure."""
    _head, found, tail = output.rpartition(_TRACEBACK)
    if found:
        lines = tail.splitlines()[1:]
        start = next((i for i, line in enumerate(lines) if line[:1].strip()), len(lines))
        error: list[str] = []
        for line in lines[start : start + 5]:
            if not line.strip():
                break
            error.append(line)
        return "\n".join(error)
    return "\n".join([line for line in output.splitlines() if line.strip()][-3:])


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


# -- the environment -------------------------------------------------------------------------

# Always passed when set (HOME and TMPDIR are the harness's own, pointing into scratch).
ENV_NAMES = frozenset(
    {"PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "NO_COLOR",
     "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR", "PATCHIT_CALLBACK_DISABLED"}
)  # fmt: skip
ENV_PREFIXES = ("LC_", "PYTHON")
# Never passed, even when the unit's code names them: patchit's own credentials and state.
_ENV_NEVER = re.compile(r"^(ANTHROPIC_|PATCHIT_(?!CALLBACK_DISABLED$))")


def allowed_env(
    env: Mapping[str, str],
    runtime_prefixes: Iterable[str] = (),
    referenced: Iterable[str] = (),
) -> dict[str, str]:
    """The part of `env` a sandboxed child may see: the allowlist (`ENV_NAMES`, `LC_*`,
    `PYTHON*`), the runtime's own settings (`runtime_prefixes`, e.g. `DBT_`), and the
    `referenced` names (what the unit's code reads), never patchit's own credentials."""
    prefixes = (*ENV_PREFIXES, *runtime_prefixes)
    wanted = set(referenced)
    return {
        name: value
        for name, value in env.items()
        if not _ENV_NEVER.match(name)
        and (name in ENV_NAMES or name.startswith(prefixes) or name in wanted)
    }


# -- what bubblewrap can enforce here ---------------------------------------------------------


@dataclass(frozen=True)
class Enforcement:
    """What bubblewrap can do on this machine: `problem` if it cannot run at all, else the
    layers it adds and, for each it cannot, why not."""

    problem: str | None
    layers: tuple[str, ...] = ()
    missing: tuple[tuple[str, str], ...] = ()


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _probe(path: str, extra: Iterable[str], command: Iterable[str] = ("true",)) -> str | None:
    """None if bwrap runs `command` in the base sandbox plus `extra`, else why not."""
    argv = [path, *extra, *_BASE_ARGS, "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", str(PRIVATE_TMP), "--", *command]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    if proc.returncode != 0:
        return f"bwrap failed: {(proc.stderr or proc.stdout).strip()[-300:] or proc.returncode}"
    return None


@functools.lru_cache(maxsize=1)
def bubblewrap_enforcement() -> Enforcement:
    """What bubblewrap can enforce here, probed once per process (a handful of `true` runs)."""
    path = bwrap_path()
    if path is None:
        return Enforcement("bwrap is not installed")
    problem = _probe(path, ())
    if problem is not None:
        return Enforcement(problem)
    layers: list[str] = []
    missing: list[tuple[str, str]] = []
    for layer, args in _LAYER_ARGS.items():
        why = _probe(path, args)
        if why is None:
            layers.append(layer)
        else:
            missing.append((layer, why))
    # The layers together, and whether capabilities really are gone in the child.
    while layers:
        combined = [arg for layer in layers for arg in _LAYER_ARGS[layer]]
        status = _probe_caps(path, combined)
        if status is None:
            break
        dropped = layers.pop(0)  # the user namespace first: it is the likeliest to be refused
        missing.append((dropped, status))
    order = list(_LAYER_ARGS)
    missing.sort(key=lambda item: order.index(item[0]))
    return Enforcement(None, tuple(layers), tuple(missing))


def _probe_caps(path: str, args: list[str]) -> str | None:
    """None if the child of these layers runs with no effective capabilities; else why not."""
    argv = [path, *args, *_BASE_ARGS, "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", str(PRIVATE_TMP), "--", "cat", "/proc/self/status"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run: {exc}"
    if proc.returncode != 0:
        return f"bwrap failed: {(proc.stderr or proc.stdout).strip()[-300:] or proc.returncode}"
    match = re.search(r"^CapEff:\s*([0-9a-f]+)", proc.stdout, re.MULTILINE)
    if match and int(match.group(1), 16) != 0:
        return f"the child still holds capabilities (CapEff {match.group(1)})"
    return None


def bubblewrap_problem() -> str | None:
    """None if bubblewrap can build our sandbox here (probed once per process), else why not."""
    return bubblewrap_enforcement().problem


def _clear_probe_cache() -> None:
    bubblewrap_enforcement.cache_clear()


bubblewrap_problem.cache_clear = _clear_probe_cache  # type: ignore[attr-defined]


# -- the sandbox ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sandbox:
    """How one harness process is isolated. Frozen: a warm process keeps the sandbox it was
    started in, and a harness restarts it when a workspace needs another one (`covers`)."""

    kind: str  # "bubblewrap" | "subprocess"
    network: bool  # the config allows the network (only bubblewrap can take it away)
    memory_mb: int
    writable: tuple[Path, ...]
    # Dirs under a hidden dir (the private /tmp, a home, $PATCHIT_HOME) the child must still
    # see, read-only: the interpreter, patchit itself, the shared cache.
    readable: tuple[Path, ...] = ()
    note: str = ""  # why this kind ran, when it is not the one asked for
    layers: tuple[str, ...] = ()  # bubblewrap layers enforced (USER_NS, NO_CAPS, PID_NS)
    missing: tuple[tuple[str, str], ...] = ()  # (layer, why) not enforced
    hidden_dirs: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()
    writes: str = "its worktree and scratch"  # what `writable` is, for the report
    # A warm runtime's forks confine each candidate's writes to its own dirs (Landlock).
    narrows: bool = False

    @property
    def blocks_network(self) -> bool:
        return self.kind == "bubblewrap" and not self.network

    @property
    def confines_writes(self) -> bool:
        return self.kind == "bubblewrap"

    def narrowed(self, *own: Path) -> list[str]:
        """What one candidate's fork of a warm runtime may write (`landlock.restrict_writes`):
        its own dirs, plus the private /tmp unless other candidates' dirs are bound under it."""
        dirs = [str(Path(p).resolve()) for p in own]
        if not any(_within(area, PRIVATE_TMP) for area in self.writable):
            dirs.append(str(PRIVATE_TMP))
        return dirs

    @property
    def pid_namespace(self) -> bool:
        """True if the child's pids are its own (meaningless, and unsignalable, outside)."""
        return self.kind == "bubblewrap" and PID_NS in self.layers

    def covers(self, *paths: Path) -> bool:
        """True if every path may be written inside this sandbox."""
        if not self.confines_writes:
            return True
        return all(any(_within(Path(p).resolve(), root) for root in self.writable) for p in paths)

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that runs `argv` in this sandbox (unchanged for a subprocess).

        bwrap runs in its own process group (`start_new_session` in `popen_sandboxed`):
        killing that group kills bwrap, and `--die-with-parent` plus the pid namespace take
        everything inside with it. The child's own session (`--new-session`) is inside.
        """
        if self.kind != "bubblewrap":
            return list(argv)
        prefix = [bwrap_path() or "bwrap"]
        for layer in self.layers:
            prefix += _LAYER_ARGS[layer]
        prefix += _BASE_ARGS
        if not self.network:
            prefix.append("--unshare-net")
        prefix += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for op, path in self._mounts():
            if op == "tmpfs":
                prefix += ["--tmpfs", str(path)]
            elif op == "null":
                prefix += ["--ro-bind", os.devnull, str(path)]
            elif op == "ro":
                prefix += ["--ro-bind", str(path), str(path)]
            else:
                prefix += ["--bind", str(path), str(path)]
        prefix += ["--setenv", "TMPDIR", str(PRIVATE_TMP)]
        return [*prefix, "--", *argv]

    def _mounts(self) -> list[tuple[str, Path]]:
        """Every mount over the read-only root, the most specific last: a dir hidden by a
        tmpfs is then re-exposed only where something deeper is bound back."""
        ops: dict[Path, str] = {PRIVATE_TMP: "tmpfs"}
        for path in self.hidden_dirs:
            ops.setdefault(path, "tmpfs")
        for path in self.hidden_files:
            ops.setdefault(path, "null")
        for path in self.readable:
            ops[path] = "ro"
        for path in self.writable:
            ops[path] = "rw"
        rank = {"tmpfs": 0, "null": 1, "ro": 2, "rw": 3}
        mounts = [(op, p) for p, op in ops.items()]
        return sorted(mounts, key=lambda item: (len(item[1].parts), rank[item[0]]))

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
        """One line for the report: what isolated the run, each layer that held, and each
        that could not (with why)."""
        net = "network allowed" if self.network else "no network"
        if self.kind == "bubblewrap":
            parts = [*self.layers, net, "env allowlist", "host secrets hidden",
                     f"{self.memory_mb} MB", "private /tmp", f"writes: {self.writes}"]  # fmt: skip
            not_done = [f"{layer} ({why})" for layer, why in self.missing]
            text = f"bubblewrap ({', '.join(parts)}"
            text += f"; not enforced: {', '.join(not_done)})" if not_done else ")"
        else:
            net = "network allowed" if self.network else "network"
            text = (
                f"subprocess ({self.memory_mb} MB, env allowlist; not enforced: {net}, "
                "writes, user ns, caps, pid ns, host secrets)"
            )
        return f"{text}: {self.note}" if self.note else text

    def limit_in(self, output: str, error: str | None = None) -> str | None:
        """`detect_limit`, keeping only limits this sandbox can impose; the network only when
        the failure's own error (`error`, else `failure_error(output)`) was refused by it."""
        limit = detect_limit(output, failure_error(output) if error is None else error)
        if limit == "network" and not self.blocks_network:
            return None
        if limit == "write" and not self.confines_writes:
            return None
        if limit is None and self.narrows and _LANDLOCK_DENIED.search(output):
            return "write"  # Landlock refused a write outside the candidate's own dirs
        return limit


def patchit_areas(*extra: Path) -> list[Path]:
    """What a warm harness process may write: the dirs under the current `$PATCHIT_HOME` that
    hold candidates' worktrees and scratch dirs (never the user's repo or database, nor
    patchit's memory, spool or cache), plus `extra`."""
    home = resolve_home()
    return [home / "worktrees", home / "sandboxes", *extra]


def shared_cache() -> Path:
    """`$PATCHIT_HOME/cache`: templates and caches shared by every run; read-only inside."""
    return resolve_home() / "cache"


def host_secrets() -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(dirs, files) of the host a sandboxed child must not read: see `SECRET_DIRS`,
    `SECRET_FILES`, other users' homes and `$PATCHIT_HOME`."""
    dirs: list[Path] = []
    candidates = [Path(d) for d in SECRET_DIRS]
    with contextlib.suppress(OSError):
        candidates += [Path(entry.pw_dir) for entry in pwd.getpwall()]
    for path in candidates:
        if not path.is_absolute() or path in _NEVER_HIDDEN or len(path.parts) < 2:
            continue
        if path.parts[1] not in _HOME_PARENTS and str(path) not in SECRET_DIRS:
            continue
        try:
            real = path.resolve()
        except OSError:
            continue
        if real.is_dir() and real not in _NEVER_HIDDEN and real not in dirs:
            dirs.append(real)
    # $PATCHIT_HOME wherever it is: directly under / (`/phome`), inside the user's checkout,
    # in a home dir; only a dir the system needs whole (/, /tmp, /var) cannot be covered,
    # and `patchit doctor` probes whether it really is hidden
    home = resolve_home()
    if len(home.parts) >= 2 and home not in _NEVER_HIDDEN and home.is_dir():
        dirs.append(home)
    dirs = [d for d in dirs if not any(_within(d, other) and d != other for other in dirs)]
    files: list[Path] = []
    for pattern in SECRET_FILES:
        for name in sorted(glob.glob(pattern)):
            path = Path(name)
            if path.is_file() and not any(_within(path, d) for d in dirs):
                files.append(path)
    return tuple(dirs), tuple(files)


def _needed_under_hidden(
    writable: tuple[Path, ...], hidden: tuple[Path, ...], extra: Iterable[Path]
) -> tuple[Path, ...]:
    """What the child must read that a hidden dir (the private /tmp, a home, $PATCHIT_HOME)
    would cover: the venv, the interpreter, patchit's own package, sys.path entries, the
    shared cache and the `extra` dirs the harness names."""
    import patchit

    candidates = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent]
    candidates += [Path(patchit.__file__).parent.parent, shared_cache(), *extra]
    candidates += [Path(entry) for entry in sys.path if entry]
    covered = (PRIVATE_TMP, *hidden)
    found: list[Path] = []
    for path in candidates:
        try:
            path = path.resolve()
        except OSError:
            continue
        if not path.is_dir() or not any(_within(path, h) and path != h for h in covered):
            continue
        if any(_within(path, root) for root in (*writable, *found)):
            continue
        found = [p for p in found if not _within(p, path)] + [path]
    return tuple(found)


def make_sandbox(
    cfg: SandboxConfig,
    writable: Iterable[Path],
    readable: Iterable[Path] = (),
    writes: str = "its worktree and scratch",
    warm: bool = False,
) -> Sandbox:
    """The sandbox the config asks for; `auto` is bubblewrap if it works, else a subprocess.

    The writable dirs are created (bwrap can only bind what exists) and resolved; `readable`
    names dirs the run reads that might be hidden (a PYTHONPATH entry in a home dir). `warm`:
    the sandbox of a runtime serving many candidates (`writable` holds all of them), whose
    forks narrow writes to one candidate's dirs with Landlock where the kernel allows it.
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
    enforcement = Enforcement("bubblewrap was not asked for")
    if cfg.isolation != "subprocess":
        enforcement = bubblewrap_enforcement()
        if enforcement.problem is None:
            kind = "bubblewrap"
        elif cfg.isolation == "bubblewrap":
            raise HarnessError(
                f"sandbox.isolation is 'bubblewrap' but {enforcement.problem}; install "
                'bubblewrap (apt-get install bubblewrap) or set isolation = "auto" in .patchit.toml'
            )
        else:
            note = enforcement.problem
    if kind != "bubblewrap":
        return Sandbox(
            kind=kind, network=cfg.network, memory_mb=cfg.memory_mb, writable=dirs,
            note=note, writes=writes,
        )  # fmt: skip
    hidden_dirs, hidden_files = host_secrets()
    missing = enforcement.missing
    narrows = False
    if warm:
        from patchit.sandbox.landlock import landlock_problem

        why = landlock_problem()
        narrows = why is None
        if narrows:
            writes = NARROWED_WRITES
        else:
            writes = WARM_WRITES
            missing = (*missing, (PER_CANDIDATE, f"landlock: {why}"))
    extra = list(readable)
    if cfg.network:  # name resolution may go through /run (systemd-resolved's stub)
        extra += [Path("/etc/resolv.conf").resolve().parent]
    return Sandbox(
        kind=kind,
        network=cfg.network,
        memory_mb=cfg.memory_mb,
        writable=dirs,
        readable=_needed_under_hidden(dirs, hidden_dirs, extra),
        note=note,
        layers=enforcement.layers,
        missing=missing,
        hidden_dirs=hidden_dirs,
        hidden_files=hidden_files,
        writes=writes,
        narrows=narrows,
    )

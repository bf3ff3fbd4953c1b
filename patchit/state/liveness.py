"""Who runs a heal, and whether that run is still alive.

A run is named by its owner id `host:pid:start:<boot id>/<pid namespace>` (`placed_owner`),
where `start` is the process's start time (`/proc/<pid>/stat`, clock ticks since boot): a pid
that the kernel handed to another process after the run died does not keep the dead run's
leases, spool rows, worktrees or sandbox schemas alive; and a pid means that process only in
its boot and pid namespace (a container beside this one may share the host name, not its pids).

Claims of spool rows and incident leases (`claim_owner`, `claimer_is_dead`) are judged so:
- an owner of this host, boot and pid namespace by its pid and start time;
- an owner of this boot in another pid namespace (a container on this kernel), from the
  kernel's initial pid namespace only, which sees every process: dead when no process of its
  namespace has its pid and start time;
  it must see and read every process for that (root, or a /proc mounted without `hidepid=`
  or `subset=`), and a claimer in a time namespace is judged with its boot-time offset (its
  start time read with it); a kernel without `NSpid:` in /proc/<pid>/status cannot tell;
- anything else (another host, boot, or a pid namespace this process cannot see into) is not
  known to be dead: its lease decides. So is an older patchit's owner without its place
  (`host:pid[:start]`), except where there is no /proc at all (no pid namespaces to mix up),
  where it is judged by its pid as before.

Standard library only: the spool (imported by the Airflow callback) uses it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from functools import cache


def _stat(pid: int) -> list[str]:
    """`/proc/<pid>/stat` from field 3 (the state) on; [] without such a process or /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return []
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    return stat.rpartition(")")[2].split()


def process_start(pid: int) -> str | None:
    """The start time of `pid` in clock ticks since boot, or None (no such process, no /proc)."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else None


@cache
def _this_host() -> str:
    return socket.gethostname()


def run_owner(pid: int | None = None) -> str:
    """The owner id of this process (or of `pid` on this host)."""
    pid = os.getpid() if pid is None else pid
    start = process_start(pid)
    return f"{_this_host()}:{pid}" + (f":{start}" if start else "")


def owner_is_dead(owner: str) -> bool:
    """True only when the run named `owner` is known to be gone: it ran on this host, and its
    pid is free or now belongs to a process that started later. An owner of another host, or
    one this module cannot read, is not known to be dead (its lease expiry decides)."""
    parts = owner.split(":")
    if len(parts) == 2:
        host, pid, start = parts[0], parts[1], None
    elif len(parts) == 3:
        host, pid, start = parts
    else:
        return False
    if host != _this_host() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, owned by another user
    except OSError:
        return False
    fields = _stat(int(pid))
    if fields and fields[0] in ("Z", "X"):
        return True  # killed, not yet reaped by its parent
    if start is None or len(fields) <= 19:
        return False
    return fields[19] != start


@cache
def this_place() -> str | None:
    """`<boot id>/<pid namespace inode>` of this process: two processes see the same pids only
    when both agree (a host name does not say it: containers of one Kubernetes pod, `--network
    host`, cloned VMs share one). None without /proc."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
        pidns = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    inode = pidns.rpartition("[")[2].rstrip("]")
    if not boot or not inode.isdigit() or ":" in boot or "/" in boot:
        return None
    return f"{boot}/{inode}"


def placed_owner(pid: int | None = None) -> str:
    """The owner id of this process with its place (`host:pid:start:<boot id>/<pid ns>`),
    judged by `placed_owner_is_dead`; without /proc, `run_owner()`."""
    owner = run_owner(pid)
    place = this_place()
    return f"{owner}:{place}" if place and owner.count(":") == 2 else owner


def owner_here(owner: str) -> bool:
    """Whether the pid of the run named `owner` (a `placed_owner()` id) is one of this
    process's pids: same host, same boot and same pid namespace. An id without its place (an
    older patchit's) is never judged here."""
    parts = owner.split(":")
    place = this_place()
    return len(parts) == 4 and place is not None and parts[0] == _this_host() and parts[3] == place


def placed_owner_is_dead(owner: str) -> bool:
    """True only when the run named `owner` (a `placed_owner()` id) is here (`owner_here`) and
    known to be gone."""
    return owner_here(owner) and owner_is_dead(owner.rsplit(":", 1)[0])


INIT_PID_NS = "4026531836"  # the inode of the kernel's initial pid namespace (PROC_PID_INIT_INO)


def claim_owner() -> str:
    """The owner id with which this process claims spool rows and incident leases."""
    return placed_owner()


def claimer_is_dead(owner: str, view: ProcessView | None = None) -> bool:
    """True only when the run that claimed a spool row or an incident lease as `owner` is known
    to be gone (see the module's doc): a live claimer is never judged dead. `view`: the
    processes of other pid namespaces read once (`claimer_judge`), else read here."""
    parts = owner.split(":")
    if len(parts) == 4:
        return placed_owner_is_dead(owner) or _dead_in_a_child_namespace(parts, view)
    if this_place() is None:  # no /proc: no pid namespaces here to tell apart
        return owner_is_dead(owner)
    return False  # an older patchit's owner: its pid may be another namespace's; lease decides


def claimer_judge() -> Callable[[str], bool]:
    """`claimer_is_dead` over one reading of /proc, made now: to judge several owners (inside
    a transaction's lock) without reading every process once for each."""
    view = ProcessView.read() if _in_initial_pid_namespace() else None
    return lambda owner: claimer_is_dead(owner, view)


def _in_initial_pid_namespace() -> bool:
    here = this_place()
    return here is not None and here.partition("/")[2] == INIT_PID_NS


def _dead_in_a_child_namespace(parts: list[str], view: ProcessView | None) -> bool:
    """Whether the owner `parts` (host, pid, start, place) of this boot but another pid
    namespace is dead, as seen from the initial pid namespace (False when this process is not
    there, or cannot see and read every process)."""
    _host, pid, start, place = parts
    here = this_place()
    if here is None or place == here or not pid.isdigit() or not start.isdigit():
        return False
    boot, _, pidns = place.partition("/")
    my_boot, _, my_pidns = here.partition("/")
    if boot != my_boot or my_pidns != INIT_PID_NS:
        return False
    view = view if view is not None else ProcessView.read()
    return view.alive(pidns, pid, int(start)) is False


def _read_status(pid: str) -> list[str]:
    """The lines of `/proc/<pid>/status` (OSError when unreadable)."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
        return handle.readlines()


def _field(lines: list[str], name: str) -> list[str] | None:
    return next((ln.split()[1:] for ln in lines if ln.startswith(name)), None)


_HIDING = ("hidepid=1", "hidepid=2", "hidepid=invisible", "hidepid=noaccess", "subset=")
_CAP_SYS_PTRACE = 19


def _proc_hides_processes() -> bool | None:
    """Whether the /proc mount hides processes (`hidepid=` 1, 2, invisible or noaccess, or
    `subset=pid`): other users' processes are missing from its listing. None when unknown."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            mounts = handle.read().splitlines()
    except OSError:
        return None
    found = None
    for line in mounts:  # the last mount at /proc is the one seen
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 6 and fields[4] == "/proc" and tail and tail[0] == "proc":
            options = ",".join([fields[5], *tail[2:3]]).split(",")
            found = any(o.startswith(_HIDING) for o in options)
    return found


def _may_read_every_process(status: list[str]) -> bool:
    """Whether every process is visible and readable here: CAP_SYS_PTRACE in the initial
    user namespace (root), or a /proc that hides none (then an unreadable one is known)."""
    if _proc_hides_processes() is False:
        return True
    caps = _field(status, "CapEff:") or ["0"]
    try:
        ptrace = bool(int(caps[0], 16) >> _CAP_SYS_PTRACE & 1)
        with open("/proc/self/uid_map", encoding="ascii") as handle:
            initial_userns = handle.read().split() == ["0", "0", "4294967295"]
    except (OSError, ValueError):
        return False
    return ptrace and initial_userns


def _boottime_offset_ns(pid: str) -> int | None:
    """The boot-time offset of `pid`'s time namespace (`timens_offsets`), in nanoseconds;
    None when unreadable."""
    try:
        with open(f"/proc/{pid}/timens_offsets", encoding="ascii") as handle:
            for line in handle:
                name, *value = line.split()
                if name in ("boottime", "7") and len(value) == 2:  # 7: CLOCK_BOOTTIME
                    return int(value[0]) * 1_000_000_000 + int(value[1])
    except (OSError, ValueError):
        return None
    return 0


class ProcessView:
    """The processes of the pid namespaces below this one, read once from /proc: for each
    (namespace inode, pid in it) its start time as it reads it itself (a time namespace's
    boot-time offset added), as a range of clock ticks, or None when unknown. `complete`:
    every process was seen and read (else a claimer missing from it is not known dead)."""

    def __init__(self, starts: dict[tuple[str, str], tuple[int, int] | None], complete: bool):
        self.starts = starts
        self.complete = complete

    @classmethod
    def read(cls) -> ProcessView:
        try:
            mine = _read_status("self")
            my_time = os.readlink("/proc/self/ns/time") if _has_time_ns() else None
            entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
        except OSError:
            return cls({}, complete=False)
        if _field(mine, "NSpid:") is None or not _may_read_every_process(mine):
            return cls({}, complete=False)  # no NSpid line (an old kernel), or blind
        my_offset = _boottime_offset_ns("self") if my_time else 0
        tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
        starts: dict[tuple[str, str], tuple[int, int] | None] = {}
        complete = True
        for name in entries:
            try:
                nspid = _field(_read_status(name), "NSpid:") or []
                if len(nspid) < 2:
                    continue  # a process of the initial pid namespace (this one's)
                pidns = os.readlink(f"/proc/{name}/ns/pid").rpartition("[")[2].rstrip("]")
                timens = os.readlink(f"/proc/{name}/ns/time") if my_time else None
            except (FileNotFoundError, ProcessLookupError):
                continue  # exited meanwhile
            except OSError:  # another user's process (its namespace unreadable)
                complete = False
                continue
            fields = _stat(int(name))
            if len(fields) <= 19 or fields[0] in ("Z", "X"):
                continue  # exited meanwhile, or killed and not yet reaped: dead
            seen = int(fields[19])
            if timens == my_time:
                starts[(pidns, nspid[-1])] = (seen, seen)
                continue
            offset = _boottime_offset_ns(name)
            if offset is None or my_offset is None:
                starts[(pidns, nspid[-1])] = None  # its own reading is unknown
                continue
            shift_ns = offset - my_offset
            low = seen + shift_ns // tick_ns
            starts[(pidns, nspid[-1])] = (low, low + (1 if shift_ns % tick_ns else 0))
        return cls(starts, complete)

    def alive(self, pidns: str, pid: str, start: int) -> bool | None:
        """Whether the process with `pid` inside pid namespace `pidns`, started at `start` (as
        it read it), runs; None when not known."""
        if (pidns, pid) in self.starts:
            span = self.starts[(pidns, pid)]
            return None if span is None else span[0] <= start <= span[1]
        return False if self.complete else None


@cache
def _has_time_ns() -> bool:
    return os.path.lexists("/proc/self/ns/time")

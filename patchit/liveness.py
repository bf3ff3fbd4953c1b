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
- anything else (another host, boot, or a pid namespace this process cannot see into) is not
  known to be dead: its lease decides. So is an older patchit's owner without its place
  (`host:pid[:start]`), except where there is no /proc at all (no pid namespaces to mix up),
  where it is judged by its pid as before.

Standard library only: the spool (imported by the Airflow callback) uses it.
"""

from __future__ import annotations

import os
import socket
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


def claimer_is_dead(owner: str) -> bool:
    """True only when the run that claimed a spool row or an incident lease as `owner` is known
    to be gone (see the module's doc): a live claimer is never judged dead."""
    parts = owner.split(":")
    if len(parts) == 4:
        return placed_owner_is_dead(owner) or _dead_in_a_child_namespace(parts)
    if this_place() is None:  # no /proc: no pid namespaces here to tell apart
        return owner_is_dead(owner)
    return False  # an older patchit's owner: its pid may be another namespace's; lease decides


def _dead_in_a_child_namespace(parts: list[str]) -> bool:
    """Whether the owner `parts` (host, pid, start, place) of this boot but another pid
    namespace is dead, as seen from the initial pid namespace (False when this process is not
    there, or cannot read every process)."""
    _host, pid, start, place = parts
    here = this_place()
    if here is None or place == here or not pid.isdigit():
        return False
    boot, _, pidns = place.partition("/")
    my_boot, _, my_pidns = here.partition("/")
    if boot != my_boot or my_pidns != INIT_PID_NS:
        return False
    return _alive_in_namespace(pidns, pid, start) is False


def _alive_in_namespace(pidns: str, pid: str, start: str) -> bool | None:
    """Whether the process with `pid` inside pid namespace `pidns`, started at `start`, runs;
    None when some process could not be read (another user's, without privileges)."""
    target = f"pid:[{pidns}]"
    blind = False
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    for name in entries:
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as handle:
                nspid = next((ln.split()[1:] for ln in handle if ln.startswith("NSpid:")), [])
            if len(nspid) < 2:
                continue  # a process of the initial pid namespace (this one's)
            if os.readlink(f"/proc/{name}/ns/pid") != target:
                continue
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
        except OSError:  # another user's process (its namespace unreadable)
            blind = True
            continue
        if nspid[-1] == pid:
            fields = _stat(int(name))
            if fields:
                return fields[0] not in ("Z", "X") and len(fields) > 19 and fields[19] == start
    return None if blind else False

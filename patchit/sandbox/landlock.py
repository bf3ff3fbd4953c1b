"""Per-candidate write confinement inside a warm runtime, with Linux Landlock.

A warm runtime (the dbt worker, the Airflow parent) serves many candidates from one process,
so bubblewrap can only bind the dirs that hold all of them (`$PATCHIT_HOME/worktrees` and
`sandboxes`) writable. Each candidate's run happens in a fork of it; before any of the
candidate's code runs, the fork calls `restrict_writes([worktree, scratch])`: from then on it
and everything it starts can write (create, change, remove, rename into, truncate) only
beneath those dirs and `/dev` (the harness adds the private `/tmp` when no candidate's dir
lives under it, and points TMPDIR into the scratch dir either way). Reads are not restricted here
(bubblewrap hides what must not be read). The restriction cannot be lifted by the process,
needs no privilege, and ends with the fork.

`landlock_problem()` says why it is unavailable (kernel without Landlock, a seccomp filter
refusing the syscalls); then the fork runs with bubblewrap's wider binds and the report says
that per-candidate writes were not enforced.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct
from collections.abc import Iterable
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # every Linux arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Write-side filesystem rights (linux/landlock.h), by the ABI that introduced them.
_WRITE_RIGHTS_V1 = (
    (1 << 1)  # WRITE_FILE
    | (1 << 4)  # REMOVE_DIR
    | (1 << 5)  # REMOVE_FILE
    | (1 << 6)  # MAKE_CHAR
    | (1 << 7)  # MAKE_DIR
    | (1 << 8)  # MAKE_REG
    | (1 << 9)  # MAKE_SOCK
    | (1 << 10)  # MAKE_FIFO
    | (1 << 11)  # MAKE_BLOCK
    | (1 << 12)  # MAKE_SYM
)
_REFER = 1 << 13  # ABI 2: link or rename across dirs
_TRUNCATE = 1 << 14  # ABI 3
ALWAYS_WRITABLE = (Path("/dev"),)  # /dev/null, /dev/shm


class LandlockError(OSError):
    """Landlock could not be applied."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or a filter refuses it)."""
    if platform.system() != "Linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )  # fmt: skip
    return max(int(version), 0)


@functools.lru_cache(maxsize=1)
def landlock_problem() -> str | None:
    """None if this kernel can confine a fork's writes, else why not (probed once)."""
    if platform.system() != "Linux":
        return "Landlock is Linux-only"
    version = abi_version()
    if version < 1:
        errno = ctypes.get_errno()
        why = os.strerror(errno) if errno else "no Landlock ABI"
        return f"the kernel offers no Landlock ({why})"
    return None


def _rights(version: int) -> int:
    rights = _WRITE_RIGHTS_V1
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    return rights


def restrict_writes(writable: Iterable[Path | str]) -> None:
    """From now on this process (it must be single-threaded: a fresh fork) and its children
    may write only beneath `writable` and `ALWAYS_WRITABLE`. LandlockError if it cannot."""
    version = abi_version()
    if version < 1:
        raise LandlockError(landlock_problem() or "no Landlock")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    rights = _rights(version)
    attr = ctypes.create_string_buffer(struct.pack("=Q", rights))
    ruleset = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), attr, ctypes.c_size_t(len(attr.raw)),
        ctypes.c_uint32(0),
    )  # fmt: skip
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in [*writable, *ALWAYS_WRITABLE]:
            try:
                fd = os.open(str(path), os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
            except OSError:
                continue  # a dir that does not exist cannot be written beneath anyway
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
                done = libc.syscall(
                    ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(ruleset),
                    ctypes.c_int(_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0),
                )  # fmt: skip
                if done < 0:
                    raise LandlockError(ctypes.get_errno(), f"landlock_add_rule {path} failed")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset),
                        ctypes.c_uint32(0)) < 0:  # fmt: skip
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)

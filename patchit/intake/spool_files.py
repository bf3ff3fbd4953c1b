"""The spool's names and its producers' fallback file, standard library only.

Shared by the SQLite spool and its Postgres backend (`patchit.intake.spool_pg`): where the
spool lives under `$PATCHIT_HOME`, what a row's payload is, and `spool/fallback.jsonl`, which
producers append to when the spool cannot take an event (locked, damaged, or a Postgres state
that cannot be reached) and which a worker on the same host imports.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.dbfiles import inode_of
from patchit.redaction import environment_secrets, scrub

SPOOL_RELATIVE_PATH = Path("spool") / "spool.sqlite3"
FALLBACK_NAME = "fallback.jsonl"
IMPORTING_MARK = ".importing-"
MAX_CLAIMS = 5
BAD_AFTER_CLAIMS = (
    f"claimed {MAX_CLAIMS} times and never finished: its workers died "
    "(`patchit spool retry ID` to try again)"
)


def spool_path(home: Path) -> Path:
    return home / SPOOL_RELATIVE_PATH


def fallback_path(home: Path) -> Path:
    return spool_path(home).with_name(FALLBACK_NAME)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def spool_payload(event: dict[str, Any], secrets: list[str] | None = None) -> str:
    """The JSON a spool row holds for `event`: redacted, surrogate-free, size-capped."""
    clean = scrub(event, environment_secrets() if secrets is None else secrets)
    return json.dumps(clean, default=str)


def fallback_batches(spool_dir: Path) -> list[Path]:
    """The fallback file taken for import (renamed under its lock), with any batch a crashed
    import left, oldest first."""
    fallback = spool_dir / FALLBACK_NAME
    if fallback.exists():
        take_fallback(fallback)
    return sorted(spool_dir.glob(f"{FALLBACK_NAME}{IMPORTING_MARK}*"))


def take_fallback(fallback: Path) -> None:
    """Rename the producers' file for import, under its lock (a producer waiting on the lock
    sees the rename and appends to a new file)."""
    try:
        fd = os.open(fallback, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if inode_of(fallback) != os.fstat(fd).st_ino or os.fstat(fd).st_size == 0:
            return
        os.rename(fallback, fallback.with_name(f"{FALLBACK_NAME}{IMPORTING_MARK}"
                                               f"{datetime.now(UTC):%Y%m%dT%H%M%S}-"
                                               f"{secrets.token_hex(4)}"))  # fmt: skip
    finally:
        os.close(fd)


def append_fallback(event: dict[str, Any], home: Path) -> Path:
    """Append one event to the producers' fallback file (`spool/fallback.jsonl`), durably."""
    path = fallback_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (spool_payload(event) + "\n").encode("utf-8")  # redacted like a spool row
    for _ in range(20):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if inode_of(path) != os.fstat(fd).st_ino:
                continue  # the worker took this file for import while we waited: reopen
            os.write(fd, line)
            os.fsync(fd)
            return path
        finally:
            os.close(fd)
    raise OSError(f"{path}: could not append (the file kept being replaced)")

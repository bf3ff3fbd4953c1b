"""The SQLite files patchit keeps (the spool and the memory): made whole, checked on open, and
moved aside when damaged, never silently emptied.

- A new file is built under a temporary name and linked into place, so a file at the real
  path always has its schema: a 0-byte file there is damage (a full disk, a crash of the file
  system, a copy cut short), never another process that is just creating it.
- Opening checks the header (cheap, every open) and, where asked, SQLite's `quick_check`.
- A damaged file is renamed `<name>.corrupt-<UTC stamp>` (its `-wal` beside it) under a lock,
  and only if it is still the file that was found damaged; callers report that in one line.

Standard library only: the spool (imported by the Airflow callback) uses it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

HEADER = b"SQLite format 3\x00"
CORRUPT_MARK = ".corrupt-"
_CORRUPTION_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def damage_of(path: Path) -> str:
    """Why the file at `path` is not a usable SQLite file ("" when its header is fine)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(HEADER))
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if not head:
        return "0 bytes"
    if head != HEADER:
        return "not a SQLite file (bad header)"
    return ""


def is_corruption(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is damaged (not locked, not read-only)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _CORRUPTION_CODES
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def quick_check(conn: sqlite3.Connection) -> str:
    """SQLite's `quick_check` ("" when it says ok; else its first complaint)."""
    rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    first = str(rows[0][0]) if rows else "no answer"
    return "" if first == "ok" else f"integrity check failed: {first}"


def create_atomically(path: Path, init: Callable[[sqlite3.Connection], None]) -> bool:
    """Build a new SQLite file with `init` and link it into `path`; False if `path` appeared
    meanwhile (another process made it: use theirs)."""
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            init(conn)
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock beside `path` (`.<name>.lock`), held for the block."""
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def quarantine(path: Path, inode: int | None = None) -> Path | None:
    """Move a damaged `path` aside as `<name>.corrupt-<YYYYMMDDTHHMMZ>`; the new name, or None
    when another process already did (or `path` is no longer the file with `inode`)."""
    with file_lock(path):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        if inode is not None and st.st_ino != inode:
            return None
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%MZ")
        dest = path.with_name(f"{path.name}{CORRUPT_MARK}{stamp}")
        n = 1
        while dest.exists():
            n += 1
            dest = path.with_name(f"{path.name}{CORRUPT_MARK}{stamp}-{n}")
        os.rename(path, dest)
        wal = Path(f"{path}-wal")
        if wal.exists():
            os.rename(wal, Path(f"{dest}-wal"))
        Path(f"{path}-shm").unlink(missing_ok=True)
        return dest


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def quarantined(path: Path) -> list[Path]:
    """The damaged copies of `path` moved aside so far, oldest first."""
    if not path.parent.is_dir():
        return []
    found = path.parent.glob(f"{path.name}{CORRUPT_MARK}*")
    return sorted(p for p in found if not p.name.endswith(("-wal", "-shm")))


def moved_aside_line(what: str, path: Path, reason: str, dest: Path | None) -> str:
    """The one line that reports a damaged file."""
    where = f"moved to {dest}" if dest else "already moved aside by another process"
    return f"{what} {path} was damaged ({reason}): {where}; started a new empty one"

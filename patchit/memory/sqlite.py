"""The SQLite plumbing under the attempt memory: opening (WAL, migrations), guarded reads and
`BEGIN IMMEDIATE` writes, with every SQLite error turned into one clear MemoryStoreError."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from sqlite_utils import Database

from patchit.errors import BadInputError, MemoryStoreError
from patchit.memory.migrations import apply_migrations

DB_RELATIVE_PATH = Path("memory") / "attempts.sqlite3"


def now_utc() -> datetime:
    return datetime.now(UTC)


class SqliteStore:
    """One SQLite file opened for the memory. Use `open(home)`."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        with self._guard("open"):
            conn = sqlite3.connect(str(path), timeout=busy_timeout_s)
        self.db = Database(conn)
        try:
            with self._guard("open"):
                # A file that is not a database only fails on first read: read now.
                conn.execute("select count(*) from sqlite_master").fetchone()
                self.db.enable_wal()
                conn.execute("PRAGMA foreign_keys = ON")
                apply_migrations(self.db)
        except BaseException:
            conn.close()
            raise

    @classmethod
    def open(cls, home: Path, busy_timeout_s: float = 30.0) -> Self:
        """Open (creating directories and schema) `<home>/memory/attempts.sqlite3`."""
        path = home / DB_RELATIVE_PATH
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemoryStoreError(
                f"{path.parent}: cannot create the memory directory ({exc.strerror}); "
                "set PATCHIT_HOME or --home to a writable directory"
            ) from exc
        return cls(path, busy_timeout_s)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                hint = f"another process held it longer than {self.busy_timeout_s:g} s; retry"
            elif isinstance(exc, sqlite3.IntegrityError):
                hint = "this is a patchit bug; please report it with this message"
            else:
                hint = "move the file aside (patchit starts a new one) or restore a backup"
            raise MemoryStoreError(
                f"{self.path}: attempt memory could not {action} ({exc}); {hint}"
            ) from exc

    @contextmanager
    def _write(self) -> Iterator[Database]:
        """One IMMEDIATE transaction (reentrant: nested writes join the outer one)."""
        conn = self.db.conn
        with self._guard("write"):
            if conn.in_transaction:
                yield self.db
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._guard("read"):
            return list(self.db.query(sql, params))

    def _require_incident(self, incident_id: str) -> None:
        if not self._rows("select 1 from incidents where id = ?", (incident_id,)):
            raise BadInputError(
                f"incident {incident_id!r} not found in {self.path}; "
                "run `patchit incidents` to list them"
            )

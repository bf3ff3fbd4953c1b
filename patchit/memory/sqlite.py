"""The SQLite plumbing under the attempt memory: opening (WAL, migrations), guarded reads and
`BEGIN IMMEDIATE` writes, with every SQLite error turned into one clear MemoryStoreError.

With a state URL (`patchit.state.url`) the same store runs on Postgres: `db` is then a
`patchit.state.pgdb.PgDatabase` (the part of sqlite-utils' API the migrations and the mixins
use, `?` SQL translated), and `BEGIN IMMEDIATE` takes the memory's advisory lock, so writes
that read first (incident grouping, leases) stay one at a time across every host.

A new memory file is built aside and linked into place (`patchit.state.dbfiles`), so a 0-byte or
otherwise damaged file is never mistaken for a new one: it is moved aside with a timestamp,
a new one is started, and `notices` carries the one line the caller reports.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, cast

from sqlite_utils import Database

from patchit.errors import BadInputError, MemoryStoreError
from patchit.memory.migrations import apply_migrations
from patchit.memory.runlog import DB_RELATIVE_PATH as DB_RELATIVE_PATH  # re-exported
from patchit.state.dbfiles import (
    create_atomically,
    damage_of,
    inode_of,
    is_corruption,
    moved_aside_line,
    quarantine,
    quick_check,
)
from patchit.state.pg import MEMORY_LOCK_KEY, StateDbError
from patchit.state.url import mask_url, state_url


def now_utc() -> datetime:
    return datetime.now(UTC)


def _init_memory(conn: sqlite3.Connection) -> None:
    """A new memory file: WAL, and every migration applied."""
    db = Database(conn)
    db.enable_wal()
    apply_migrations(db)


class SqliteStore:
    """One SQLite file opened for the memory. Use `open(home)`."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        self.path = path
        self.where = str(path)  # what messages name: the file, or the masked state URL
        self.busy_timeout_s = busy_timeout_s
        self.notices: list[str] = []
        with self._guard("open"):
            if not path.exists():
                create_atomically(path, _init_memory)
            elif why := damage_of(path):
                self._replace_damaged(why)
        try:
            self.db = Database(self._connect())
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise self._error("open", exc) from exc
            self._replace_damaged(str(exc))
            self.db = Database(self._connect())

    def _connect(self) -> sqlite3.Connection:
        with self._guard("open"):
            conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s)
        try:
            # A file that is not a database only fails on first read: read now. The quick
            # check reads every page's structure (about 1 ms per MB): damage is found at open,
            # not half-way through a heal.
            conn.execute("select count(*) from sqlite_master").fetchone()
            if why := quick_check(conn):
                raise sqlite3.DatabaseError(f"{why} (database disk image is malformed)")
            db = Database(conn)
            with self._guard("open"):
                db.enable_wal()
                conn.execute("PRAGMA foreign_keys = ON")
                apply_migrations(db)
        except BaseException:
            conn.close()
            raise
        return conn

    def _replace_damaged(self, why: str) -> None:
        dest = quarantine(self.path, inode_of(self.path))
        create_atomically(self.path, _init_memory)
        self.notices.append(moved_aside_line("the attempt memory", self.path, why, dest))

    @classmethod
    def open(cls, home: Path, busy_timeout_s: float = 30.0) -> Self:
        """Open (creating directories and schema) `<home>/memory/attempts.sqlite3`, or the
        deployment's Postgres state when it has a state URL."""
        path = home / DB_RELATIVE_PATH
        url = state_url(home)  # StateUrlError: a BadInputError, exit 2
        if url is not None:
            return cls.on_postgres(url, path, busy_timeout_s)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemoryStoreError(
                f"{path.parent}: cannot create the memory directory ({exc.strerror}); "
                "set PATCHIT_HOME or --home to a writable directory"
            ) from exc
        return cls(path, busy_timeout_s)

    @classmethod
    def on_postgres(cls, url: str, path: Path, busy_timeout_s: float = 30.0) -> Self:
        """The store in the Postgres state at `url`, migrated (`path` is the SQLite file this
        deployment does not use). An unreachable server is a StateUnavailableError (exit 2)."""
        from patchit.state.pgdb import PgDatabase

        store = cls.__new__(cls)
        store.path, store.where, store.busy_timeout_s = path, mask_url(url), busy_timeout_s
        store.notices = []
        pg = PgDatabase.connect(url, MEMORY_LOCK_KEY, busy_timeout_s)
        # PgDatabase speaks the part of Database the memory uses (tests/state/test_pgdb.py)
        store.db = cast(Database, pg)
        try:
            with store._guard("migrate"):
                apply_migrations(store.db)
        except BaseException:
            pg.close()
            raise
        return store

    @classmethod
    def sharing(cls, store: SqliteStore) -> Self:
        """This class of store over `store`'s open connection: the file is opened and checked
        once (the dbt wrapper opens `OutcomeStore` and needs the whole `Memory` on a failure)."""
        if isinstance(store, cls):
            return store
        shared = cls.__new__(cls)
        shared.__dict__.update(store.__dict__)
        return shared

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
        except (sqlite3.Error, StateDbError) as exc:
            raise self._error(action, exc) from exc

    def _error(self, action: str, exc: sqlite3.Error | StateDbError) -> MemoryStoreError:
        if isinstance(exc, StateDbError):
            if exc.busy:
                hint = f"another worker held its lock longer than {self.busy_timeout_s:g} s; retry"
            elif exc.integrity:
                hint = "this is a patchit bug; please report it with this message"
            elif exc.reconnected and exc.rolled_back:
                hint = "the connection is back and the transaction was rolled back: run it again"
            elif exc.lost:
                hint = "the state server went away: check it, then retry"
            else:
                hint = "check the state database and the role's privileges"
            error = MemoryStoreError(
                f"{self.where}: attempt memory could not {action} ({exc}); {hint}"
            )
            error.retryable = exc.reconnected and exc.rolled_back
            return error
        if "locked" in str(exc) or "busy" in str(exc):
            hint = f"another process held it longer than {self.busy_timeout_s:g} s; retry"
        elif isinstance(exc, sqlite3.IntegrityError):
            hint = "this is a patchit bug; please report it with this message"
        elif is_corruption(exc):
            hint = "the file is damaged: the next patchit run moves it aside and starts a new one"
        else:
            hint = "check the file's permissions and the disk, or restore a backup"
        return MemoryStoreError(f"{self.where}: attempt memory could not {action} ({exc}); {hint}")

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
                f"incident {incident_id!r} not found in {self.where}; "
                "run `patchit incidents` to list them"
            )

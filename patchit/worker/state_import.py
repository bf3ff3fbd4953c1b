"""`patchit state import`: an existing SQLite state (memory and spool) copied into the
deployment's Postgres state, for a move from one worker to many.

- The SQLite files are never written: each is copied with SQLite's backup API from a read-only
  connection into a temporary file, which is checked (`quick_check`) and migrated to the
  current schema (an older patchit's memory imports too); the rows are read from the copy.
- Everything is written in one Postgres transaction, under the memory's and the spool's
  advisory locks: all of it, or (an error, a conflict) none of it.
- Running it twice imports nothing twice. A row whose key is already in Postgres with the same
  values is skipped; with other values, it is a conflict: nothing is written and one line
  names the table, the key and what to do. Rows keyed by a number (attempts, the LLM ledger,
  reviews, notifications, unit runs) get Postgres' own numbers and are matched by their
  values. Spool rows waiting for a worker (`pending`, `bad`; `taken` ones go back to
  `pending`) are recorded in `spool_imports` by a hash of their contents.
- Leases are not copied: they belong to runs of the old worker, which must be stopped.
- Events in the old home's fallback files (`spool/fallback.jsonl*`: producers wrote them there
  when the spool was busy) are in no SQLite file: the import is refused, in one line, until
  the old worker has run once and spooled them (it imports them exactly once; this import
  cannot, without writing beside the old state).
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from patchit.errors import BadInputError
from patchit.intake.spool import Spool
from patchit.intake.spool_files import FALLBACK_NAME, spool_path
from patchit.intake.spool_pg import SPOOL_LOCK_KEY
from patchit.memory import Memory
from patchit.memory.migrations import apply_migrations
from patchit.memory.runlog import DB_RELATIVE_PATH
from patchit.state.dbfiles import quick_check
from patchit.state.pg import MEMORY_LOCK_KEY, PgConn, StateDbError, connect
from patchit.state.url import mask_url

# by their text key, in the order foreign keys need
KEYED = (
    ("incidents", "id"), ("events", "event_id"), ("deliveries", "incident_id"),
    ("outcomes", "incident_id"), ("last_good", "project_key"),
)  # fmt: skip
NUMBERED = ("attempts", "llm_calls", "reviews", "notifications", "unit_runs")  # `id` is theirs
NOT_COPIED = ("leases", "_migrations")
SPOOL_STATES = ("pending", "bad", "taken")
IMPORT_MARK = "state-import:"


class ImportConflict(BadInputError):
    """The Postgres state holds other data under a key the SQLite state uses (exit 2)."""


@dataclass
class Imported:
    """How many rows each table received, and how many were there already."""

    added: Counter[str] = field(default_factory=Counter)
    present: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        tables = [*(t for t, _ in KEYED), *NUMBERED, "spool"]
        added = ", ".join(f"{self.added[t]} {t}" for t in tables if self.added[t]) or "nothing"
        present = sum(self.present.values())
        return f"imported {added}" + (f"; {present} row(s) already there" if present else "")


def memory_and_spool(source: Path) -> tuple[Path, Path | None]:
    """The SQLite memory file (and the spool file, when there is one) that `source` names: a
    `$PATCHIT_HOME`, or a memory file itself."""
    if source.is_dir():
        memory, spool = source / DB_RELATIVE_PATH, spool_path(source)
        if not memory.is_file():
            raise BadInputError(
                f"--from {source}: no SQLite memory at {memory}; pass the old $PATCHIT_HOME "
                "or its memory/attempts.sqlite3"
            )
        if waiting := _fallback_files(spool.parent):
            raise BadInputError(
                f"--from {source}: {len(waiting)} fallback file(s) of events the old worker has "
                f"not spooled yet ({', '.join(p.name for p in waiting)} in {spool.parent}); "
                f"run the old worker once (PATCHIT_HOME={source} patchit worker --once), then "
                "this import again; nothing was written"
            )
        return memory, spool if spool.is_file() else None
    if not source.is_file():
        raise BadInputError(f"--from {source}: no such file or directory; pass the old "
                            "$PATCHIT_HOME or its memory/attempts.sqlite3")  # fmt: skip
    return source, None


def _fallback_files(spool_dir: Path) -> list[Path]:
    """The producers' fallback files in `spool_dir` that hold events (`fallback.jsonl`, and
    batches a worker took for import and did not finish): not in the spool file, so not
    imported. Importing them here could not be exactly once (the worker names a batch when it
    takes the file, and this import writes nothing beside the old state); the old worker
    imports them, exactly once, into its spool."""
    if not spool_dir.is_dir():
        return []
    return sorted(
        p for p in spool_dir.glob(f"{FALLBACK_NAME}*") if p.is_file() and p.stat().st_size > 0
    )


@contextmanager
def readable_copy(path: Path, what: str, migrate: bool) -> Iterator[sqlite3.Connection]:
    """A migrated (with `migrate`) copy of the SQLite file `path`, which is only read."""
    with tempfile.TemporaryDirectory(prefix="patchit-import-") as tmp:
        copy = sqlite3.connect(str(Path(tmp) / "copy.sqlite3"))
        try:
            try:
                source = sqlite3.connect(_read_only_uri(path), uri=True)
                try:
                    source.backup(copy)
                finally:
                    source.close()
                if why := quick_check(copy):
                    raise sqlite3.DatabaseError(why)
                if migrate:
                    apply_migrations(Database(copy))
            except sqlite3.Error as exc:
                raise BadInputError(
                    f"--from {path}: not a readable patchit {what} ({exc}); pass the old "
                    "$PATCHIT_HOME or its memory/attempts.sqlite3"
                ) from exc
            copy.row_factory = sqlite3.Row
            yield copy
        finally:
            copy.close()


def _read_only_uri(path: Path) -> str:
    """A URI opening `path` without writing beside it: read-only opens of a WAL database
    make its `-wal` and `-shm` files, so without a `-wal` (all is in the file: the old worker
    stopped cleanly) the file is opened as immutable, and with one, read-only through it."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    return uri if path.with_name(f"{path.name}-wal").exists() else f"{uri}&immutable=1"


def import_state(source: Path, url: str, dry_run: bool = False) -> Imported:
    """Copy the SQLite state at `source` into the Postgres state at `url` (its tables made
    first by opening it as patchit does); see the module's docstring."""
    memory_file, spool_file = memory_and_spool(source)
    Memory.on_postgres(url, memory_file).close()  # the tables, migrated, as patchit makes them
    Spool.on_postgres(url, source, 30.0).close()
    conn = PgConn(connect(url), MEMORY_LOCK_KEY)
    done = Imported()
    try:
        with readable_copy(memory_file, "memory", migrate=True) as memory:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("select pg_advisory_xact_lock(?)", (SPOOL_LOCK_KEY,))
                for table, key in KEYED:
                    _copy_keyed(memory, conn, table, key, done, url)
                for table in NUMBERED:
                    _copy_numbered(memory, conn, table, done)
                if spool_file is not None:
                    with readable_copy(spool_file, "spool", migrate=False) as spool:
                        _copy_spool(spool, conn, done)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("ROLLBACK" if dry_run else "COMMIT")
    except StateDbError as exc:
        raise BadInputError(
            f"{mask_url(url)}: the import was not made ({exc}); nothing was written; check "
            "the state server, then run it again"
        ) from exc
    finally:
        conn.close()
    return done


def _columns(memory: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in memory.execute(f"pragma table_info({table})")]


def _clean(value: Any) -> Any:
    """A value as Postgres keeps it (text without NUL), to compare like with like."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


def _copy_keyed(
    memory: sqlite3.Connection, conn: PgConn, table: str, key: str, done: Imported, url: str
) -> None:
    names = _columns(memory, table)
    quoted = ", ".join(f'"{n}"' for n in names)
    there = {
        row[names.index(key)]: tuple(row)
        for row in conn.execute(f'select {quoted} from "{table}"').fetchall()
    }
    insert = f'insert into "{table}" ({quoted}) values ({", ".join("?" * len(names))})'
    for row in memory.execute(f'select {quoted} from "{table}"'):
        values = tuple(_clean(v) for v in row)
        have = there.get(values[names.index(key)])
        if have is None:
            conn.execute(insert, values)
            done.added[table] += 1
        elif have == values:
            done.present[table] += 1
        else:
            differs = [n for n, a, b in zip(names, have, values, strict=True) if a != b]
            raise ImportConflict(
                f"{mask_url(url)}: {table} {key} {values[names.index(key)]!r} is already there "
                f"with other values ({', '.join(differs)}): the Postgres state is not an earlier "
                "import of this SQLite state; nothing was written (import into an empty state, "
                "or remove that row there)"
            )


def _copy_numbered(memory: sqlite3.Connection, conn: PgConn, table: str, done: Imported) -> None:
    names = [n for n in _columns(memory, table) if n != "id"]
    quoted = ", ".join(f'"{n}"' for n in names)
    there = Counter(tuple(r) for r in conn.execute(f'select {quoted} from "{table}"').fetchall())
    insert = f'insert into "{table}" ({quoted}) values ({", ".join("?" * len(names))})'
    for row in memory.execute(f'select {quoted} from "{table}" order by id'):
        values = tuple(_clean(v) for v in row)
        if there[values] > 0:
            there[values] -= 1
            done.present[table] += 1
            continue
        conn.execute(insert, values)
        done.added[table] += 1


def _copy_spool(spool: sqlite3.Connection, conn: PgConn, done: Imported) -> None:
    marks = ", ".join("?" * len(SPOOL_STATES))
    rows = spool.execute(
        "select created_utc, source, payload, state, claims, reason from spool"
        f" where state in ({marks}) order by id",
        SPOOL_STATES,
    ).fetchall()
    now = datetime.now(UTC).isoformat()
    for created, source, payload, state, claims, reason in rows:
        digest = hashlib.sha256(f"{created}\n{source}\n{payload}".encode()).hexdigest()[:32]
        name = f"{IMPORT_MARK}{digest}"
        if conn.execute("select 1 from spool_imports where name = ?", (name,)).fetchone():
            done.present["spool"] += 1
            continue
        conn.execute(
            "insert into spool (created_utc, source, payload, state, claims, reason)"
            " values (?, ?, ?, ?, ?, ?)",
            (created, source, payload, "bad" if state == "bad" else "pending", claims, reason),
        )
        conn.execute(
            "insert into spool_imports (name, imported_utc, rows) values (?, ?, 1)", (name, now)
        )
        done.added["spool"] += 1

"""The spool's store: the `Spool` class over its SQLite file or the deployment's Postgres
state (`patchit.intake.spool_pg`), the rows workers claim and the fallback file they import;
standard library only (the Airflow callback imports it, through `patchit.intake.spool`).

`patchit.intake.spool` is the spool's public module (it re-exports what is here) and holds the
producers' side: how an event is spooled within a deadline, or appended to the fallback file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from patchit.intake.spool_files import (
    BAD_AFTER_CLAIMS,
    MAX_CLAIMS,
    MAX_LINE_BYTES,
    SQLITE_ID,
    fallback_batches,
    fallback_lines,
    now_iso,
    spool_path,
    spool_payload,
    spool_schema,
)
from patchit.state.dbfiles import (
    create_atomically,
    damage_of,
    inode_of,
    is_corruption,
    moved_aside_line,
    quarantine,
    quick_check,
)
from patchit.state.liveness import claimer_judge
from patchit.state.pg import PgConn, StateDbError
from patchit.state.url import StateUrlError, mask_url, state_url
from patchit.text.redaction import clean_text, environment_secrets, redact

WORKER_BUSY_TIMEOUT_S = 30.0

_SCHEMA = spool_schema(SQLITE_ID)


class SpoolDamaged(Exception):
    """The spool file is damaged; the producer spools to the fallback file instead."""


def _init_schema(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(_SCHEMA)


class SpooledEvent(NamedTuple):
    """One claimed row: its id, the event dict as the producer wrote it (maybe invalid), and
    how many workers died processing it so far."""

    id: int
    payload: str
    claims: int

    def data(self) -> Any:
        return json.loads(self.payload)


def spool_where(home: Path) -> str:
    """What messages call the spool under `home`: its file, or the masked state URL."""
    try:
        url = state_url(home)
    except StateUrlError:
        url = None
    return mask_url(url) if url else str(spool_path(home))


class SpoolConn(Protocol):
    """What the spool needs of a connection: sqlite3's, or `patchit.state.pg.PgConn`."""

    def execute(self, sql: str, parameters: Any = (), /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...

    def close(self) -> None: ...


class Spool:
    """The spool. `Spool.open(home)` creates directories and schema when missing: the SQLite
    file under `home`, or the tables of the deployment's Postgres state (`patchit.state`).

    `check=True` (workers, `patchit spool`) runs SQLite's quick check and moves a damaged file
    aside, starting a new one, with the one-line report in `notices`; producers leave that to
    the worker and raise `SpoolDamaged`. `where` names the spool in messages (the file, or the
    state URL with its password masked); `path`'s directory holds the fallback file either way.
    """

    conn: SpoolConn

    def __init__(self, path: Path, busy_timeout_s: float, check: bool = False) -> None:
        self.path = path
        self.where = str(path)
        self.pg_conn: PgConn | None = None
        self.notices: list[str] = []
        if not path.exists():
            create_atomically(path, _init_schema)
        elif why := damage_of(path):
            self._replace_damaged(why, check)
        try:
            self.conn = self._connect(busy_timeout_s, check)
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc) and not str(exc).startswith("integrity check failed"):
                raise
            self._replace_damaged(str(exc), check)
            self.conn = self._connect(busy_timeout_s, check=False)

    def _connect(self, busy_timeout_s: float, check: bool) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), never implicit
        conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if check and (why := quick_check(conn)):
                raise sqlite3.DatabaseError(why)
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _replace_damaged(self, why: str, check: bool) -> None:
        if not check:
            raise SpoolDamaged(f"{self.path} is damaged ({why})")
        dest = quarantine(self.path, inode_of(self.path))
        create_atomically(self.path, _init_schema)
        self.notices.append(moved_aside_line("the spool", self.path, why, dest))

    @classmethod
    def open(
        cls,
        home: Path,
        busy_timeout_s: float = WORKER_BUSY_TIMEOUT_S,
        check: bool = False,
        producer: bool = False,
    ) -> Spool:
        """The spool of `home`; a `producer`'s (an event's writer, given a deadline) never
        reconnects to a Postgres state (`patchit.intake.spool_pg.open_pg_spool`)."""
        path = spool_path(home)
        url = state_url(home)
        if url is not None:
            return cls.on_postgres(url, path, busy_timeout_s, reconnect=not producer)
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(path, busy_timeout_s, check)

    @classmethod
    def on_postgres(
        cls, url: str, path: Path, busy_timeout_s: float, reconnect: bool = True
    ) -> Spool:
        """The spool in the Postgres state at `url`; `path`'s directory keeps the fallback."""
        from patchit.intake.spool_pg import open_pg_spool

        spool = cls.__new__(cls)
        spool.path, spool.where, spool.notices = path, mask_url(url), []
        spool.conn = spool.pg_conn = open_pg_spool(url, busy_timeout_s, reconnect)
        return spool

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, event: dict[str, Any], secrets: list[str] | None = None) -> int:
        """Spool one event dict (one INSERT, committed at once), redacted; its row id."""
        return self._insert(spool_payload(event, secrets), _source_of(event))

    def _insert(self, payload: str, source: str, state: str = "pending", reason: str = "") -> int:
        if self.pg_conn is not None:
            from patchit.intake.spool_pg import insert_row

            return insert_row(self.pg_conn, payload, source, state, reason)
        cur = self.conn.execute(
            "insert into spool (created_utc, source, payload, state, reason)"
            " values (?, ?, ?, ?, ?)",
            (now_iso(), source, payload, state, reason or None),
        )
        return int(cur.lastrowid or 0)

    def put_many(self, events: list[dict[str, Any]], owner: str | None = None) -> list[int]:
        """Spool several events in one transaction; their row ids. With `owner`, the rows are
        spooled already taken by that run (the dbt wrapper, which heals them itself): a worker
        takes them only once that run is dead, as it takes a dead worker's rows."""
        ids: list[int] = []
        secrets = environment_secrets()  # read once for the whole batch
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            ids = [self.put(e, secrets) for e in events]
            if owner is not None:
                self.conn.executemany(
                    "update spool set state = 'taken', owner = ?, taken_utc = ? where id = ?",
                    [(owner, now_iso(), i) for i in ids],
                )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return ids

    def claim(
        self,
        owner: str,
        limit: int = 50,
        lease_s: float = 3600.0,
        is_dead: Callable[[str], bool] | None = None,
    ) -> list[SpooledEvent]:
        """Take up to `limit` pending rows (or rows whose worker died or whose lease ran out),
        oldest first. A row whose workers died `MAX_CLAIMS` times while processing it is
        marked bad instead. A claim counts against no row: the worker charges the rows it is
        processing (`charge`), so a kill counts against those, not the rest of its batch.
        `is_dead` judges the claimers (by default `claimer_judge()`: /proc read once, before
        the transaction takes its lock; not at all when no other run holds rows, as in a storm
        that one worker takes in batches)."""
        if is_dead is None:
            is_dead = claimer_judge() if self._held_by_others(owner) else _not_dead
        if self.pg_conn is not None:
            from patchit.intake.spool_pg import claim_rows

            taken = claim_rows(self.pg_conn, owner, limit, lease_s, is_dead)
            return [SpooledEvent(id=i, payload=p, claims=n) for i, p, n in taken]
        expired = (datetime.now(UTC) - timedelta(seconds=lease_s)).isoformat()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._requeue_dead(owner, is_dead)
            self.conn.execute(  # `claims > 0`: read by the index of charged rows only
                "update spool set state = 'bad', reason = ? where claims > 0 and claims >= ?"
                " and (state = 'pending' or (state = 'taken' and taken_utc < ?))"
                " and owner is not null",
                (BAD_AFTER_CLAIMS, MAX_CLAIMS, expired),
            )
            rows = self._claimable(expired, limit)
            self.conn.executemany(
                "update spool set state = 'taken', owner = ?, taken_utc = ? where id = ?",
                [(owner, now_iso(), row[0]) for row in rows],
            )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return [SpooledEvent(id=r[0], payload=r[1], claims=r[2]) for r in rows]

    def _claimable(self, expired: str, limit: int) -> list[tuple[int, str, int]]:
        """The oldest `limit` rows pending or with a lease older than `expired`: each state
        read in id order from its index, then merged (one query with an OR sorted every
        pending row and read its payload, at each batch of a storm)."""
        ids = [
            row[0]
            for query, args in (
                ("select id from spool where state = 'pending' order by id limit ?", (limit,)),
                (
                    "select id from spool where state = 'taken' and taken_utc < ?"
                    " order by id limit ?",
                    (expired, limit),
                ),
            )
            for row in self.conn.execute(query, args).fetchall()
        ]
        taken = sorted(ids)[:limit]
        if not taken:
            return []
        marks = ", ".join("?" * len(taken))
        rows = self.conn.execute(
            f"select id, payload, claims from spool where id in ({marks}) order by id", taken
        ).fetchall()
        return [(int(i), str(payload), int(claims)) for i, payload, claims in rows]

    def _held_by_others(self, owner: str) -> bool:
        """Whether any row is taken by a run other than `owner` (read without a lock: a run
        that takes rows after it is alive, not one to judge)."""
        row = self.conn.execute(
            "select 1 from spool where state = 'taken' and owner is not null and owner <> ?"
            " limit 1",
            (owner,),
        ).fetchone()
        return row is not None

    def _requeue_dead(self, owner: str, is_dead: Callable[[str], bool]) -> int:
        """Put rows taken by workers that died back to pending (inside claim's transaction)."""
        owners = [
            str(r[0])
            for r in self.conn.execute(
                "select distinct owner from spool where state = 'taken' and owner is not null"
            ).fetchall()
        ]
        dead = [o for o in owners if o != owner and is_dead(o)]
        requeued = 0
        for gone in dead:
            cur = self.conn.execute(
                "update spool set state = 'pending' where state = 'taken' and owner = ?", (gone,)
            )
            requeued += cur.rowcount
        return requeued

    def release(self, row_ids: list[int]) -> None:
        """Give taken rows back (pending): the worker stops, through no fault of theirs."""
        self.conn.executemany(
            "update spool set state = 'pending' where id = ? and state = 'taken'",
            [(i,) for i in row_ids],
        )

    def charge(self, row_ids: list[int]) -> None:
        """Count a death against rows whose processing starts now; `refund` takes it back
        when it ends. A worker killed meanwhile leaves it counted against these rows only:
        the rest of its batch was not what killed it (`MAX_CLAIMS`)."""
        self._add_claims(row_ids, "claims + 1")

    def refund(self, row_ids: list[int]) -> None:
        """Take back what `charge` counted: the rows' processing ended, it did not kill."""
        self._add_claims(row_ids, "max(claims - 1, 0)")

    def _add_claims(self, row_ids: list[int], claims: str) -> None:
        for start in range(0, len(row_ids), 500):
            chunk = row_ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            self.conn.execute(f"update spool set claims = {claims} where id in ({marks})", chunk)

    def mark_done(self, row_id: int) -> None:
        self.mark_all_done([row_id])

    def mark_all_done(self, row_ids: list[int]) -> None:
        """Mark rows processed, 500 to a statement (a storm's batch is not a commit a row)."""
        for start in range(0, len(row_ids), 500):
            chunk = row_ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            self.conn.execute(
                f"update spool set state = 'done', reason = null where id in ({marks})", chunk
            )

    def mark_bad(self, row_id: int, reason: str) -> None:
        """Keep the row for inspection with why it could not be processed."""
        self.conn.execute(
            "update spool set state = 'bad', reason = ? where id = ?",
            (redact(reason, max_chars=4000), row_id),
        )

    def retry(self, row_ids: list[int] | None = None) -> int:
        """Put rows back to pending, with a fresh claim count: the given ones (bad, or taken by
        a worker that died), or every bad row; how many."""
        if row_ids:
            marks = ", ".join("?" * len(row_ids))
            cur = self.conn.execute(
                "update spool set state = 'pending', reason = null, claims = 0, owner = null"
                f" where id in ({marks}) and state in ('bad', 'taken', 'done')",
                row_ids,
            )
        else:
            cur = self.conn.execute(
                "update spool set state = 'pending', reason = null, claims = 0, owner = null"
                " where state = 'bad'"
            )
        return int(cur.rowcount)

    def drop(self, row_ids: list[int] | None = None, state: str | None = None) -> int:
        """Delete the given rows, or every row in `state`; how many."""
        if row_ids:
            marks = ", ".join("?" * len(row_ids))
            cur = self.conn.execute(f"delete from spool where id in ({marks})", row_ids)
        elif state:
            cur = self.conn.execute("delete from spool where state = ?", (state,))
        else:
            return 0
        return int(cur.rowcount)

    def states_of(self, row_ids: list[int]) -> dict[int, tuple[str, str | None]]:
        """(state, owner) of each of `row_ids` that is in the spool."""
        found: dict[int, tuple[str, str | None]] = {}
        for start in range(0, len(row_ids), 500):
            chunk = row_ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for row_id, state, owner in self.conn.execute(
                f"select id, state, owner from spool where id in ({marks})", chunk
            ).fetchall():
                found[int(row_id)] = (str(state), owner)
        return found

    def counts(self) -> dict[str, int]:
        rows = self.conn.execute("select state, count(*) from spool group by state").fetchall()
        return {str(state): int(n) for state, n in rows}

    def rows(self, state: str | None = None) -> list[dict[str, Any]]:
        sql = (
            "select id, created_utc, source, payload, state, owner, taken_utc, claims, reason"
            " from spool"
        )
        params: tuple[Any, ...] = ()
        if state is not None:
            sql += " where state = ?"
            params = (state,)
        cur = self.conn.execute(sql + " order by id", params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    # -- the producers' fallback file -------------------------------------------------------

    def import_fallback(self) -> int:
        """Move the events producers appended to `fallback.jsonl` into the spool, exactly once
        (a crash between the import and the file's removal does not import it twice); how many
        rows. A line that is not a JSON object is kept as a bad row, never dropped, and the
        other lines are imported: no line can stop the import (`_import_line`)."""
        return sum(self._import_batch(batch) for batch in fallback_batches(self.path.parent))

    def _import_batch(self, batch: Path) -> int:
        try:
            return self._import_batch_once(batch)
        except StateDbError as exc:  # the Postgres connection came back: imported or not,
            if not exc.reconnected:  # the batch's name in spool_imports says which
                raise
        return self._import_batch_once(batch)

    def _import_batch_once(self, batch: Path) -> int:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            done = self.conn.execute(
                "select 1 from spool_imports where name = ?", (batch.name,)
            ).fetchone()
            count = 0
            if not done:
                for number, raw, aside in fallback_lines(batch):
                    self._import_line(f"{batch.name} line {number}", raw, aside)
                    count += 1
                self.conn.execute(
                    "insert into spool_imports (name, imported_utc, rows) values (?, ?, ?)",
                    (batch.name, now_iso(), count),
                )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        batch.unlink(missing_ok=True)
        return count

    def _import_line(self, where: str, raw: bytes, aside: Path | None) -> None:
        """One line of a fallback batch as a spool row: pending, or bad with why. Whatever is
        wrong with the line (not JSON, nested too deep, too large) makes its own row bad and
        the import goes on; only an error of the spool itself stops it."""
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if aside is not None:
            why = (f"{where} is longer than {MAX_LINE_BYTES} bytes, more than an event is: "
                   f"moved aside whole to {aside}; its head is kept here")  # fmt: skip
            self._insert(text, "", state="bad", reason=why)
            return
        try:
            event = json.loads(text)
            if not isinstance(event, dict):
                raise ValueError("not a JSON object")
            payload = spool_payload(event)
        except Exception as exc:  # the line's own fault, whatever it is: only its row is bad
            why = f"{where} unreadable ({_unreadable(exc)}); kept here as it was"
            self._insert(text, "", state="bad", reason=why)
            return
        self._insert(payload, _source_of(event))


def _not_dead(_owner: str) -> bool:
    return False


def _source_of(event: dict[str, Any]) -> str:
    """The `source` column of an event dict: its source when that is text, else ""."""
    source = event.get("source", "")
    return clean_text(source)[:50] if isinstance(source, str) else ""


def _unreadable(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    if isinstance(exc, ValueError):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {str(exc)[:200]}"

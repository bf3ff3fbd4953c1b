"""The durable spool: failure events waiting for a worker, one SQLite file, standard library only.

`$PATCHIT_HOME/spool/spool.sqlite3` (WAL). Producers (the Airflow callback, `patchit airflow
scan`) only INSERT a JSON event dict, with a short busy timeout, so they never wait long on a
worker. Workers claim rows inside one `BEGIN IMMEDIATE` transaction, so two workers never take
the same row. A row's life: `pending` -> `taken` -> `done` | `bad` (kept, with the reason, for
inspection). A `taken` row whose lease ran out (its worker died) is claimed again.

Nothing reaches the file unredacted: every payload passes through `patchit.redaction` (with
the secret-named environment values of the process that writes it), whoever the producer is.

This module is imported by the Airflow callback inside the task process: it must import
nothing but the standard library (no pydantic, no patchit.events).
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from patchit.redaction import clean_text, environment_secrets, redact, scrub

SPOOL_RELATIVE_PATH = Path("spool") / "spool.sqlite3"
PRODUCER_BUSY_TIMEOUT_S = 2.0
WORKER_BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
create table if not exists spool (
    id integer primary key autoincrement,
    created_utc text not null,
    source text not null,
    payload text not null,
    state text not null default 'pending',
    owner text,
    taken_utc text,
    claims integer not null default 0,
    reason text
);
create index if not exists spool_state on spool (state, id);
"""


def resolve_home_stdlib(cli_home: str | os.PathLike[str] | None = None) -> Path:
    """The same rule as `patchit.config.resolve_home`, without importing pydantic.

    Kept in step with it by tests/intake/test_spool.py.
    """
    if cli_home:
        return Path(cli_home).expanduser().resolve()
    env = os.environ.get("PATCHIT_HOME")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return (Path(xdg).expanduser() / "patchit").resolve()


def spool_path(home: Path) -> Path:
    return home / SPOOL_RELATIVE_PATH


def _now() -> str:
    return datetime.now(UTC).isoformat()


def spool_payload(event: dict[str, Any], secrets: list[str] | None = None) -> str:
    """The JSON a spool row holds for `event`: redacted, surrogate-free, size-capped."""
    clean = scrub(event, environment_secrets() if secrets is None else secrets)
    return json.dumps(clean, default=str)


class SpooledEvent(NamedTuple):
    """One claimed row: its id and the event dict as the producer wrote it (maybe invalid)."""

    id: int
    payload: str
    claims: int

    def data(self) -> Any:
        return json.loads(self.payload)


class Spool:
    """The spool file. `Spool.open(home)` creates directories and schema when missing."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), never implicit
        self.conn = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None)
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        except BaseException:
            self.conn.close()
            raise

    @classmethod
    def open(cls, home: Path, busy_timeout_s: float = WORKER_BUSY_TIMEOUT_S) -> Spool:
        path = spool_path(home)
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(path, busy_timeout_s)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, event: dict[str, Any], secrets: list[str] | None = None) -> int:
        """Spool one event dict (one INSERT, committed at once), redacted; its row id."""
        payload = spool_payload(event, secrets)
        source = clean_text(str(event.get("source", "")))[:50]
        cur = self.conn.execute(
            "insert into spool (created_utc, source, payload) values (?, ?, ?)",
            (_now(), source, payload),
        )
        return int(cur.lastrowid or 0)

    def put_many(self, events: list[dict[str, Any]]) -> list[int]:
        ids: list[int] = []
        secrets = environment_secrets()  # read once for the whole batch
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            ids = [self.put(e, secrets) for e in events]
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return ids

    def claim(self, owner: str, limit: int = 50, lease_s: float = 3600.0) -> list[SpooledEvent]:
        """Take up to `limit` pending rows (or rows whose lease ran out), oldest first."""
        expired = (datetime.now(UTC) - timedelta(seconds=lease_s)).isoformat()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            rows = self.conn.execute(
                "select id, payload, claims from spool where state = 'pending'"
                " or (state = 'taken' and taken_utc < ?) order by id limit ?",
                (expired, limit),
            ).fetchall()
            self.conn.executemany(
                "update spool set state = 'taken', owner = ?, taken_utc = ?,"
                " claims = claims + 1 where id = ?",
                [(owner, _now(), row[0]) for row in rows],
            )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return [SpooledEvent(id=r[0], payload=r[1], claims=r[2] + 1) for r in rows]

    def mark_done(self, row_id: int) -> None:
        self.conn.execute("update spool set state = 'done', reason = null where id = ?", (row_id,))

    def mark_bad(self, row_id: int, reason: str) -> None:
        """Keep the row for inspection with why it could not be processed."""
        self.conn.execute(
            "update spool set state = 'bad', reason = ? where id = ?",
            (redact(reason, max_chars=4000), row_id),
        )

    def counts(self) -> dict[str, int]:
        rows = self.conn.execute("select state, count(*) from spool group by state").fetchall()
        return {str(state): int(n) for state, n in rows}

    def rows(self, state: str | None = None) -> list[dict[str, Any]]:
        sql = "select id, created_utc, source, payload, state, owner, claims, reason from spool"
        params: tuple[Any, ...] = ()
        if state is not None:
            sql += " where state = ?"
            params = (state,)
        cur = self.conn.execute(sql + " order by id", params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def spool_event(event: dict[str, Any], home: Path | None = None) -> int:
    """Open the spool with the producer's short busy timeout, insert one event, close."""
    with Spool.open(home or resolve_home_stdlib(), PRODUCER_BUSY_TIMEOUT_S) as spool:
        return spool.put(event)

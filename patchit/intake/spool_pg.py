"""The spool's Postgres backend: its table, its inserts and its claims with row locks.

`Spool.open(home)` uses it when the deployment has a state URL (`patchit.state.url`). The rows
and their life are the SQLite spool's (`pending` -> `taken` -> `done` | `bad`); what differs:
- a claim takes rows with `SELECT ... FOR UPDATE SKIP LOCKED`: workers on several hosts claim
  at once without waiting on each other, and never take one row twice; requeueing the rows of
  dead workers and marking rows bad after `MAX_CLAIMS` skip locked rows the same way, so a
  claim never waits on another;
- `BEGIN IMMEDIATE` (a producer's batch, a fallback import) takes the spool's advisory lock,
  as it takes SQLite's write lock.

Standard library only at import (psycopg2 is imported by `patchit.state.pg` when connecting):
the Airflow callback imports the spool.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from patchit.intake.spool_files import (
    BAD_AFTER_CLAIMS,
    MAX_CLAIMS,
    POSTGRES_ID,
    now_iso,
    spool_schema,
)
from patchit.state.pg import PgConn, StateDbError, connect

SPOOL_LOCK_KEY = 0x7061_7463_6869_7473  # the spool's BEGIN IMMEDIATE
_SCHEMA = spool_schema(POSTGRES_ID)
_CLAIMABLE = "state = 'pending' or (state = 'taken' and taken_utc < ?)"


def open_pg_spool(url: str, busy_timeout_s: float, reconnect: bool = True) -> PgConn:
    """A connection to the state's spool, its tables created on first use (under the spool's
    lock: two first workers do not race on `create table`).

    Only a worker's (`reconnect`) connects again when its connection is lost. A producer's
    never does: the Airflow callback gives up on it after its deadline and writes the event to
    the fallback file, and its abandoned thread must not reconnect later and spool the event a
    second time."""
    timeouts = {"lock_timeout_s": busy_timeout_s, "connect_timeout_s": busy_timeout_s,
                "statement_timeout_s": 2 * busy_timeout_s}  # fmt: skip
    reopen = (lambda: connect(url, **timeouts)) if reconnect else None
    conn = PgConn(connect(url, **timeouts), SPOOL_LOCK_KEY, reopen=reopen)
    try:
        if conn.execute("select to_regclass('spool_imports')").fetchone()[0] is None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(_SCHEMA)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


def insert_row(conn: PgConn, payload: str, source: str, state: str, reason: str) -> int:
    cur = conn.execute(
        "insert into spool (created_utc, source, payload, state, reason)"
        " values (?, ?, ?, ?, ?) returning id",
        (now_iso(), source, payload, state, reason or None),
    )
    return int(cur.fetchone()[0])


def claim_rows(
    conn: PgConn, owner: str, limit: int, lease_s: float, is_dead: Callable[[str], bool]
) -> list[tuple[int, str, int]]:
    """Take up to `limit` claimable rows, oldest first, skipping rows other claims hold;
    (id, payload, claims: how many workers died processing it).

    When the connection is lost during the claim and comes back, the claim is known by its
    owner and time stamp: the rows a lost COMMIT did take are returned, else (the server rolled
    it back) the claim is made once more. No row is taken twice or left taken unseen."""
    stamp = now_iso()
    try:
        return _claim(conn, owner, stamp, limit, lease_s, is_dead)
    except StateDbError as exc:
        if not exc.reconnected:
            raise
    taken = conn.execute(
        "select id, payload, claims from spool where state = 'taken' and owner = ?"
        " and taken_utc = ? order by id",
        (owner, stamp),
    ).fetchall()
    if taken:
        return [(int(r[0]), str(r[1]), int(r[2])) for r in taken]
    return _claim(conn, owner, now_iso(), limit, lease_s, is_dead)


def _claim(
    conn: PgConn,
    owner: str,
    stamp: str,
    limit: int,
    lease_s: float,
    is_dead: Callable[[str], bool],
) -> list[tuple[int, str, int]]:
    expired = (datetime.now(UTC) - timedelta(seconds=lease_s)).isoformat()
    conn.execute("BEGIN")
    try:
        _requeue_dead(conn, owner, is_dead)
        conn.execute(
            "update spool set state = 'bad', reason = ? where id in (select id from spool"
            f" where claims >= ? and ({_CLAIMABLE}) and owner is not null"
            " for update skip locked)",
            (BAD_AFTER_CLAIMS, MAX_CLAIMS, expired),
        )
        rows = conn.execute(
            f"select id, payload, claims from spool where {_CLAIMABLE}"
            " order by id limit ? for update skip locked",
            (expired, limit),
        ).fetchall()
        if rows:
            conn.execute(
                "update spool set state = 'taken', owner = ?, taken_utc = ? where id = any(?)",
                (owner, stamp, [int(row[0]) for row in rows]),
            )
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]


def _requeue_dead(conn: PgConn, owner: str, is_dead: Callable[[str], bool]) -> int:
    """Put rows taken by workers known dead back to pending (`is_dead`: a worker judges the
    owners whose pids it can see; another host's dead worker's rows come back when their
    lease runs out)."""
    owners = [
        str(r[0])
        for r in conn.execute(
            "select distinct owner from spool where state = 'taken' and owner is not null"
        ).fetchall()
    ]
    requeued = 0
    for gone in (o for o in owners if o != owner and is_dead(o)):
        cur = conn.execute(
            "update spool set state = 'pending' where id in (select id from spool"
            " where state = 'taken' and owner = ? for update skip locked)",
            (gone,),
        )
        requeued += cur.rowcount
    return requeued

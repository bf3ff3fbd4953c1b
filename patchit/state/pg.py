"""Connections to the shared Postgres state, standard library only until one is opened.

psycopg2 is imported when a connection is made, never at import: the Airflow callback imports
this module's users inside the task process. `PgConn` speaks the part of sqlite3's connection
API that the spool and the memory use (`execute` with `?` placeholders, `BEGIN IMMEDIATE`,
`COMMIT`, `ROLLBACK`, `in_transaction`), so their transaction code reads the same on both:
- autocommit, with explicit transactions, like sqlite3 with `isolation_level=None`;
- `BEGIN IMMEDIATE` begins and, when the connection has a `lock_key`, takes that transaction
  advisory lock: the one writer at a time that SQLite's write lock gives, across hosts;
- `lock_timeout` is the busy timeout: a wait past it fails, as SQLite's "database is locked".
Every driver error comes out as `StateDbError`; a failed connect as `StateUnavailableError`
(one line naming the URL, password masked, and what to do; exit 2).

A connection opened with a way to `reopen` it outlives a server restart: when the connection
is lost (the server restarted, a proxy cut it), it is opened again, retrying with a growing
pause for `PATCHIT_STATE_RECONNECT_S` (30 s by default), and the statement is sent again only
when that cannot apply anything twice:
- `BEGIN` and reads outside a transaction are sent again;
- a write outside a transaction is preceded, after a second of silence, by `select 1`, so a
  connection that died while idle is replaced before the write; a write whose own round trip
  broke is not sent again (it may have been applied);
- inside a transaction the server rolled it back: the error (`lost`, `reconnected`,
  `rolled_back`) goes to the transaction's owner, who may run it again (`spool_pg.claim_rows`
  does, and the worker heals a batch again whose memory write was cut); a lost `ROLLBACK` has
  nothing left to undo;
- a lost `COMMIT` is resolved on the new connection by the transaction's id (asked before the
  COMMIT is sent, `txid_status`) when the server did not crash meanwhile: committed, it
  returns as if nothing happened; rolled back, it raises `rolled_back`; unknown (a server that
  cannot say), it raises without it. After a crash it raises without it: WAL lost in the crash
  may let recovery hand the same xid to another transaction, whose 'committed' would be taken
  for this one's. A crash is told by SQLSTATE 57P02/57P03 or, as the client mostly gets no
  SQLSTATE at all (a `pg_terminate_backend` neither), by the statistics' reset time
  (`pg_stat_bgwriter.stats_reset`, asked with the xid): crash recovery discards the
  statistics, an orderly end of a backend or a fast restart keeps them (a `pg_stat_reset_shared`
  meanwhile is taken for a crash: raised, the safe side).
Past the bound, one `StateDbError(lost=True)` says the server did not come back.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from patchit.errors import BadInputError
from patchit.state.url import STATE_URL_ENV, mask_url

CONNECT_TIMEOUT_S = 10
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 30, 10, 3
TCP_USER_TIMEOUT_MS = 60_000  # sent data unacknowledged this long: the connection is dead
MEMORY_LOCK_KEY = 0x7061_7463_6869_74  # "patchit": the memory's one-writer lock
RECONNECT_ENV = "PATCHIT_STATE_RECONNECT_S"
RECONNECT_S = 30.0  # how long a lost connection is tried again before giving up
PING_IDLE_S = 1.0  # a write after this much silence checks the connection first
_LOST_CODES = ("57P01", "57P02", "57P03")  # admin or crash shutdown, the server starting up
_CRASH_CODES = ("57P02", "57P03")  # crash shutdown, the server starting up (recovering)
# asked before a COMMIT: the transaction's id, and when the statistics were last reset (a
# crash resets them: crash recovery discards them; an orderly end or restart keeps them)
_BEFORE_COMMIT = "select txid_current_if_assigned(), (select stats_reset from pg_stat_bgwriter)"
_STATS_RESET = "select stats_reset from pg_stat_bgwriter"
COMMIT_STATUS_WAIT_S = 10.0  # a cut backend may still be ending its COMMIT: how long to ask
_JSON_EXTRACT = re.compile(r"json_extract\((\w+),\s*'\$\.(\w+)'\)")
_LITERAL = re.compile(r"('(?:[^']|'')*')")  # a string literal: left as it is written
_TRANSLATIONS = [  # outside string literals
    (re.compile(r"\bis\s+not\s+\?", re.IGNORECASE), "is distinct from ?"),
    (re.compile(r"\bis\s+\?", re.IGNORECASE), "is not distinct from ?"),
    (re.compile(r"\[(\w+)\]"), r'"\1"'),
    (re.compile(r"\bmax\(([^(),]+),\s*([^(),]+)\)"), r"greatest(\1, \2)"),
    (re.compile(r"\?"), "%s"),
]


class StateDbError(Exception):
    """A Postgres error of the shared state, with what kind it is."""

    def __init__(self, message: str, *, busy: bool = False, integrity: bool = False,
                 lost: bool = False) -> None:  # fmt: skip
        super().__init__(message)
        self.busy = busy
        self.integrity = integrity
        self.lost = lost
        self.code = ""  # the SQLSTATE, when the server sent one
        self.reconnected = False  # lost, and the connection is open again: a retry may work
        self.rolled_back = False  # lost inside a transaction that is known to be rolled back


class StateUnavailableError(BadInputError):
    """The state URL's server cannot be reached or refuses us (exit 2); `reason` is the
    driver's (masked)."""

    reason: str = ""


@lru_cache(maxsize=512)
def to_pg(sql: str) -> str:
    """SQLite-flavoured SQL as the memory writes it, for Postgres: `?` placeholders, `is ?`,
    `[name]` quoting, `json_extract(col, '$.key')`, two-argument `max`."""
    # `%` doubled everywhere (psycopg2 formats the whole text, literals too); the rest only
    # outside literals: `select 'is it?'` keeps its text
    sql = _JSON_EXTRACT.sub(r"(\1::jsonb ->> '\2')", sql).replace("%", "%%")
    parts = _LITERAL.split(sql)
    for i in range(0, len(parts), 2):  # the even parts are outside literals
        for pattern, replacement in _TRANSLATIONS:
            parts[i] = pattern.sub(replacement, parts[i])
    return "".join(parts)


def _wrap(exc: Exception) -> StateDbError:
    code = str(getattr(exc, "pgcode", "") or "")
    dropped = type(exc).__name__ in ("OperationalError", "InterfaceError") and not code
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    error = StateDbError(
        first,
        busy=code in ("55P03", "40P01", "57014"),  # lock timeout, deadlock, statement timeout
        integrity=code.startswith("23"),
        lost=code.startswith("08") or code in _LOST_CODES or dropped,
    )
    error.code = code
    return error


def _passwords(url: str) -> list[str]:
    """The URL's password as written and percent-decoded (userinfo and `password=`)."""
    found = re.findall(r"^[a-zA-Z][\w+.-]*://[^:/@]*:([^@]*)@", url)
    found += re.findall(r"password=([^&\s]*)", url, flags=re.IGNORECASE)
    both = {p for raw in found for p in (raw, unquote(raw)) if p}
    return sorted(both, key=len, reverse=True)  # the longer first: no half-masked token


def scrub(text: str, url: str) -> str:
    """`text` (a libpq message) with the URL masked and its password, as written or
    decoded, replaced by `***` (libpq quotes the URI, or a token it cannot decode)."""
    text = text.replace(url, mask_url(url))
    for password in _passwords(url):
        text = text.replace(password, "***")
    return text


def _numeric(value: str | None, _cursor: Any) -> int | float | None:
    """NUMERIC (what sum() of integers gives) as int or float, as SQLite returns them."""
    if value is None:
        return None
    return float(value) if any(c in value for c in ".eEN") else int(value)


def connect(url: str, *, lock_timeout_s: float = 30.0,
            connect_timeout_s: float = CONNECT_TIMEOUT_S,
            statement_timeout_s: float | None = None) -> Any:  # fmt: skip
    """A psycopg2 connection (autocommit) to `url`, or StateUnavailableError. Waits on locks
    past `lock_timeout_s` fail (SQLite's busy timeout); so do statements past
    `statement_timeout_s` when given (a producer must not hang on a server that stopped
    answering)."""
    try:
        import psycopg2
        import psycopg2.extensions
    except ImportError as exc:
        raise StateUnavailableError(
            f"{STATE_URL_ENV} {mask_url(url)}: psycopg2 is not installed; "
            "pip install 'patchit[postgres]'"
        ) from exc
    # the timeouts go in the startup packet (no statement after login that could stall), and
    # the socket carries keepalives and a TCP user timeout: a server or pooler that accepts
    # and then stops answering is found out instead of blocking for ever
    settings = [f"-c lock_timeout={max(1, int(lock_timeout_s * 1000))}"]
    if statement_timeout_s is not None:
        settings.append(f"-c statement_timeout={max(1, int(statement_timeout_s * 1000))}")
    raw = None
    try:
        given = psycopg2.extensions.parse_dsn(url).get("options", "")
        raw = psycopg2.connect(
            url,
            connect_timeout=max(1, round(connect_timeout_s)),
            application_name="patchit",
            options=" ".join([given, *settings]).strip(),
            keepalives=1,
            keepalives_idle=KEEPALIVE_IDLE_S,
            keepalives_interval=KEEPALIVE_INTERVAL_S,
            keepalives_count=KEEPALIVE_COUNT,
            tcp_user_timeout=TCP_USER_TIMEOUT_MS,
        )
        raw.autocommit = True
        numeric = psycopg2.extensions.new_type((1700,), "PATCHIT_NUMERIC", _numeric)
        psycopg2.extensions.register_type(numeric, raw)
    except psycopg2.Error as exc:
        if raw is not None:
            raw.close()
        why = scrub(" ".join(str(exc).split()), url) or type(exc).__name__
        error = StateUnavailableError(
            f"the state database {mask_url(url)}: cannot connect ({why}); start the server or fix "
            f"{STATE_URL_ENV} / [state] url in $PATCHIT_HOME/patchit.toml (unset both for the "
            "embedded SQLite state)"
        )
        error.reason = why
        raise error from exc
    return raw


def _without_nul(params: Any) -> Any:
    """Text values with NUL as U+FFFD: Postgres text cannot hold NUL (SQLite's can)."""
    if isinstance(params, str):
        return params.replace("\x00", "\ufffd")
    if isinstance(params, dict):
        return {k: _without_nul(v) for k, v in params.items()}
    if isinstance(params, (tuple, list)):
        return type(params)(_without_nul(v) for v in params)
    return params


def reconnect_bound_s() -> float:
    """How long a lost connection is tried again (`PATCHIT_STATE_RECONNECT_S`, else 30 s)."""
    raw = os.environ.get(RECONNECT_ENV, "").strip()
    try:
        return max(0.0, float(raw)) if raw else RECONNECT_S
    except ValueError:
        return RECONNECT_S


def _is_read(sql: str) -> bool:
    """A statement that changes nothing: sending it twice is harmless."""
    text = sql.lstrip().lower()
    return (
        text.startswith(("select", "show"))
        and "for update" not in text
        and "pg_advisory" not in text
        and "nextval" not in text
    )


class PgConn:
    """A psycopg2 connection behind the sqlite3 calls the spool and the memory make; with
    `reopen` (a function returning a new raw connection), it reconnects when the connection is
    lost (see the module's docstring)."""

    def __init__(
        self, raw: Any, lock_key: int | None = None, reopen: Callable[[], Any] | None = None
    ) -> None:
        self.raw = raw
        self.lock_key = lock_key
        self.reopen = reopen
        self.reconnects = 0  # how many times the connection was opened again
        self._used = time.monotonic()

    @property
    def in_transaction(self) -> bool:
        if self.raw.closed:
            return False
        return bool(self.raw.info.transaction_status != 0)  # 0: TRANSACTION_STATUS_IDLE

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        word = sql.strip().upper()
        if word.startswith("BEGIN"):
            return self._again_if_lost(lambda: self._begin("IMMEDIATE" in word))
        if word == "ROLLBACK":
            try:
                return self._run("rollback", ())
            except StateDbError as exc:
                if exc.reconnected:  # the server rolled it back when the connection went
                    return None
                raise
        if word == "COMMIT":
            return self._commit()  # lost: resolved by the transaction's id, never resent
        args = tuple(params) if isinstance(params, (list, tuple)) else params
        return self._statement(to_pg(sql), args)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            self._statement(to_pg(sql), tuple(row))

    def _statement(self, sql: str, args: Any) -> Any:
        if self.in_transaction:
            return self._run(sql, args)
        if _is_read(sql):
            return self._again_if_lost(lambda: self._run(sql, args))
        if self.reopen is not None and time.monotonic() - self._used > PING_IDLE_S:
            self._again_if_lost(lambda: self._run("select 1", ()))
        return self._run(sql, args)

    def _begin(self, immediate: bool) -> Any:
        cur = self._run("begin", ())
        if self.lock_key is not None and immediate:
            try:
                self._run("select pg_advisory_xact_lock(%s)", (self.lock_key,))
            except BaseException:
                # a lock timeout aborts the transaction: without the rollback every later
                # call on this connection fails "current transaction is aborted"
                self._rollback_quietly()
                raise
        return cur

    def _commit(self) -> Any:
        """COMMIT; when its round trip is lost, whether the server committed it, by its
        transaction id: committed, nothing is raised."""
        xid = reset = None
        if self.reopen is not None and self.in_transaction:
            xid, reset = self._run(_BEFORE_COMMIT, ()).fetchone()
        try:
            return self._run("commit", ())
        except StateDbError as exc:
            if not exc.reconnected:
                raise
            if xid is None:
                return None  # it wrote nothing: there was nothing to commit
            if exc.code in _CRASH_CODES or self._stats_reset() != reset:
                # the server crashed meanwhile: WAL that never reached the disk may have left
                # this xid to another transaction after recovery, whose 'committed' (or
                # 'aborted') txid_status would report; the client cannot tell which it was
                raise
            status = self._xid_status(int(xid))
            if status == "committed":
                return None
            exc.rolled_back = status == "aborted"
            raise

    def _stats_reset(self) -> object:
        """When the server's statistics were last reset (`pg_stat_bgwriter`), on the new
        connection; a new object (equal to nothing) when it cannot say."""
        try:
            return self._run(_STATS_RESET, ()).fetchone()[0]
        except StateDbError:
            return object()

    def _xid_status(self, xid: int) -> str | None:
        """`txid_status(xid)` on the new connection, waiting while the cut backend still ends
        it ("in progress"); None when the server cannot say (too old, or an error)."""
        deadline = time.monotonic() + COMMIT_STATUS_WAIT_S
        while True:
            try:
                row = self._run("select txid_status(%s)", (xid,)).fetchone()
            except StateDbError:
                return None
            status = str(row[0]) if row and row[0] is not None else None
            if status != "in progress" or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def _again_if_lost(self, send: Callable[[], Any]) -> Any:
        """`send()`, once more when the connection was lost and is open again."""
        try:
            return send()
        except StateDbError as exc:
            if not exc.reconnected:
                raise
        return send()

    def _run(self, sql: str, params: Any) -> Any:
        inside = self.in_transaction  # a lost connection rolls it back
        try:
            cur = self.raw.cursor()
            cur.execute(sql, _without_nul(params))
        except ValueError as exc:  # what psycopg2 raises for a value it cannot send
            raise StateDbError(f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            if not type(exc).__module__.startswith("psycopg2"):
                raise
            error = _wrap(exc)
            error.lost = error.lost or bool(self.raw.closed)
            if error.lost and self.reopen is not None:
                self._reconnect(error)
                error.reconnected = True
                error.rolled_back = inside and sql != "commit"  # COMMIT: see _commit
            raise error from exc
        finally:
            self._used = time.monotonic()
        return cur

    def _reconnect(self, cause: StateDbError) -> None:
        """Open the connection again, pausing longer between tries, for the bound at most;
        StateDbError(lost) naming the last failure past it."""
        assert self.reopen is not None
        self.close()
        bound_s = reconnect_bound_s()
        deadline, pause_s = time.monotonic() + bound_s, 0.25
        while True:
            try:
                self.raw = self.reopen()
                self.reconnects += 1
                return
            except StateUnavailableError as exc:
                why = exc.reason or str(exc)
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise StateDbError(
                    f"the connection was lost ({cause}) and the server did not answer again "
                    f"within {bound_s:g} s ({RECONNECT_ENV}; last: {why})",
                    lost=True,
                ) from cause
            time.sleep(min(pause_s, left_s))  # and a last try at the bound
            pause_s = min(2 * pause_s, 5.0)

    def _rollback_quietly(self) -> None:
        try:  # a statement: in autocommit mode psycopg2's rollback() sends nothing
            self.raw.cursor().execute("rollback")
        except Exception as exc:  # the connection is gone: nothing to roll back
            if not type(exc).__module__.startswith("psycopg2"):
                raise

    def close(self) -> None:
        try:
            self.raw.close()
        except Exception as exc:  # closing a connection the server dropped
            if not type(exc).__module__.startswith("psycopg2"):
                raise


def rows_as_dicts(cur: Any) -> list[dict[str, Any]]:
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

"""A COMMIT whose round trip was lost, on a fake connection (fast): its transaction id settles
it only when the server did not crash meanwhile (no SQLSTATE 57P02/57P03, the statistics not
reset); after a crash the xid may have gone to another transaction. A COMMIT whose status
stays unknown is not retried either."""

from __future__ import annotations

from typing import Any

import pytest

from patchit.state.pg import PgConn, StateDbError


class DriverError(Exception):
    """What psycopg2 raises (its module's name is what PgConn looks at)."""

    def __init__(self, message: str, pgcode: str | None) -> None:
        super().__init__(message)
        self.pgcode = pgcode


DriverError.__module__ = "psycopg2.fake"
OperationalError = type("OperationalError", (DriverError,), {"__module__": "psycopg2.fake"})


class Cursor:
    def __init__(self, conn: FakeRaw) -> None:
        self.conn = conn
        self.row: tuple[Any, ...] | None = None

    def execute(self, sql: str, params: Any = ()) -> None:
        self.conn.sent.append(sql)
        if self.conn.closed:
            raise OperationalError("connection already closed", None)
        if sql == "commit" and self.conn.cut_commit is not None:
            self.conn.closed = True  # "": dropped with no SQLSTATE
            raise OperationalError("server closed the connection", self.conn.cut_commit or None)
        if sql == "begin":
            self.conn.info.transaction_status = 2
        elif sql in ("commit", "rollback"):
            self.conn.info.transaction_status = 0
        elif sql.startswith("select txid_current_if_assigned"):
            self.row = (1234, self.conn.stats_reset)
        elif sql.startswith("select stats_reset"):
            self.row = (self.conn.stats_reset,)
        elif sql.startswith("select txid_status"):
            self.row = (self.conn.status,)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row


class Info:
    transaction_status = 0


class FakeRaw:
    def __init__(
        self, cut_commit: str | None = None, status: str | None = "committed", reset: str = "t0"
    ) -> None:
        self.cut_commit = cut_commit
        self.status = status
        self.stats_reset = reset
        self.closed = False
        self.info = Info()
        self.sent: list[str] = []

    def cursor(self) -> Cursor:
        return Cursor(self)

    def close(self) -> None:
        self.closed = True


def _commit_cut(code: str, status: str | None, crash: bool = False) -> PgConn:
    """A transaction whose COMMIT is cut with `code` ("": none); the new connection says
    `status` (and, after a `crash`, statistics reset since)."""
    after = FakeRaw(status=status, reset="t1" if crash else "t0")
    conn = PgConn(FakeRaw(cut_commit=code), reopen=lambda: after)
    conn.execute("BEGIN")
    conn.execute("insert into t values (1)")
    conn.execute("COMMIT")
    return conn


@pytest.mark.parametrize("code", ["", "57P01"])  # dropped (pg_terminate_backend), admin shutdown
def test_an_orderly_end_is_settled_by_the_transaction_id(code: str) -> None:
    conn = _commit_cut(code, "committed")  # returns: committed
    assert conn.reconnects == 1 and "select txid_status(%s)" in conn.raw.sent
    with pytest.raises(StateDbError) as info:
        _commit_cut(code, "aborted")
    assert info.value.reconnected and info.value.rolled_back  # healed again


@pytest.mark.parametrize(("code", "crash"), [("", True), ("57P02", False), ("57P03", False)])
@pytest.mark.parametrize("status", ["committed", "aborted"])
def test_after_a_crash_the_transaction_id_is_not_trusted(
    code: str, crash: bool, status: str
) -> None:
    with pytest.raises(StateDbError) as info:
        _commit_cut(code, status, crash=crash)
    assert info.value.reconnected and not info.value.rolled_back  # not retried: exit 1


@pytest.mark.parametrize("status", [None, "in progress"])
def test_a_commit_whose_status_stays_unknown_is_not_retried(
    status: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import patchit.state.pg as pg

    monkeypatch.setattr(pg, "COMMIT_STATUS_WAIT_S", 0.1)
    with pytest.raises(StateDbError) as info:
        _commit_cut("57P01", status)
    assert info.value.reconnected and not info.value.rolled_back

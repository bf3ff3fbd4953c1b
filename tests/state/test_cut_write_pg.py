"""A memory write cut off inside its transaction on a real PostgreSQL 15 server (its backend
terminated with `pg_terminate_backend`): the worker reconnects, gives the batch back to the
spool and heals it again, and the incident ends once, with one attempt. A cut `COMMIT` is
settled by its transaction id: rolled back, healed again; committed, the worker goes on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.bench.race import fake_context, make_cause
from patchit.intake.spool import Spool
from patchit.state.pg import PgConn, StateDbError, connect
from patchit.worker.worker import Worker

pytestmark = pytest.mark.slow


@pytest.fixture
def other(state_url: str) -> Iterator[PgConn]:
    conn = PgConn(connect(state_url))
    yield conn
    conn.close()


def _cut_at(
    monkeypatch: pytest.MonkeyPatch,
    other: PgConn,
    hit: Callable[[str], bool],
    after: bool = False,
) -> list[str]:
    """Terminate the backend of the connection that sends the first statement `hit` picks,
    just before it is sent (`after`: just after the server ran it, so that its reply is
    lost). What was cut."""
    cut: list[str] = []
    real = PgConn._run

    def run(self: PgConn, sql: str, params: Any) -> Any:
        if cut or not hit(sql):
            return real(self, sql, params)
        cut.append(sql)
        [[pid]] = real(self, "select pg_backend_pid()", ()).fetchall()
        if after:
            real(self, sql, params)  # applied by the server...
        other.execute("select pg_terminate_backend(?)", (pid,))
        time.sleep(0.2)  # the backend is gone
        # ... and (after) its reply lost with the connection, as the next round trip finds
        return real(self, "select 1" if after else sql, () if after else params)

    monkeypatch.setattr(PgConn, "_run", run)
    return cut


def _heal_one(pg_home: Path, tmp_path: Path) -> tuple[Worker, list[str]]:
    event = make_cause(tmp_path / "repos", 0)
    with Spool.open(pg_home) as spool:
        spool.put(event.model_dump(mode="json"))
    lines: list[str] = []
    worker = Worker(pg_home, say=lines.append, make_context=fake_context)
    stats = worker.run(once=True)
    assert (stats.processed, stats.bad) == (1, 0), lines
    return worker, lines


def _ended_once(other: PgConn) -> None:
    incidents = other.execute("select id, status, fingerprint from incidents").fetchall()
    assert [status for _, status, _ in incidents] == ["fixed"], incidents
    attempts = other.execute(
        "select incident_id, fingerprint, diff_hash, outcome from attempts"
    ).fetchall()
    assert len(attempts) == 1 and attempts[0][3] == "verified", attempts
    assert other.execute("select state, count(*) from spool group by state").fetchall() == [
        ("done", 1)
    ]
    assert other.execute("select count(*) from leases").fetchall() == [(0,)]


@pytest.mark.parametrize("table", ["incidents", "attempts"])
def test_a_cut_inside_a_memory_transaction_is_healed_again(
    table: str, pg_home: Path, other: PgConn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # incidents: the incident's creation (it ended the worker); attempts: the verified
    # candidate's record (it ended the incident as failed)
    cut = _cut_at(monkeypatch, other, lambda sql: sql.startswith(f'insert into "{table}"'))
    _worker, lines = _heal_one(pg_home, tmp_path)
    assert len(cut) == 1
    assert any("given back to the spool" in line for line in lines), lines
    _ended_once(other)


def _attempts_commit() -> Callable[[str], bool]:
    """A matcher of the COMMIT of the transaction that inserts an attempt."""
    seen: list[str] = []

    def commit_of_attempt(sql: str) -> bool:
        seen.append(sql)
        return sql == "commit" and any(s.startswith('insert into "attempts"') for s in seen[-4:])

    return commit_of_attempt


def test_a_cut_commit_the_server_rolled_back_is_healed_again(
    pg_home: Path, other: PgConn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_of_attempt = _attempts_commit()
    cut = _cut_at(monkeypatch, other, commit_of_attempt)
    _worker, lines = _heal_one(pg_home, tmp_path)
    assert cut == ["commit"]
    assert any("given back to the spool" in line for line in lines), lines
    _ended_once(other)


def test_a_commit_whose_reply_was_lost_is_known_committed(
    pg_home: Path, other: PgConn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_of_attempt = _attempts_commit()
    cut = _cut_at(monkeypatch, other, commit_of_attempt, after=True)
    _worker, lines = _heal_one(pg_home, tmp_path)
    assert cut == ["commit"]
    assert not any("given back to the spool" in line for line in lines), lines
    _ended_once(other)


def test_a_commit_cut_by_a_crash_is_not_settled_by_its_transaction_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the backend killed -9 just after its COMMIT ran: the postmaster ends every process and
    # recovers (a crash; a cluster of its own). Its xid's status cannot be trusted after a
    # crash (WAL lost in it may let another transaction reuse the xid): not settled, not
    # retried, though this COMMIT did reach the disk
    import os
    import signal

    from tests.pg_cluster import pg_cluster
    from tests.state.conftest import database_url

    with pg_cluster() as pg:
        url = database_url(pg, "postgres")
        conn = PgConn(connect(url), reopen=lambda: connect(url))
        conn.execute("create table t (x int)")
        real = PgConn._run

        def run(self: PgConn, sql: str, params: Any) -> Any:
            if sql != "commit":
                return real(self, sql, params)
            [[pid]] = real(self, "select pg_backend_pid()", ()).fetchall()
            real(self, sql, params)  # committed ...
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)  # ... and its reply lost in the crash
            return real(self, "select 1", ())

        conn.execute("BEGIN")
        conn.execute("insert into t values (1)")
        monkeypatch.setattr(PgConn, "_run", run)
        with pytest.raises(StateDbError) as info:
            conn.execute("COMMIT")
        monkeypatch.undo()
        assert info.value.reconnected and not info.value.rolled_back
        assert conn.execute("select count(*) from t").fetchone() == (1,)
        conn.close()

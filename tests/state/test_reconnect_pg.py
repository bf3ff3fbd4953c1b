"""A worker on a Postgres state outlives a server restart, and gives up in one line when the
server stays down: real clusters of their own (restarted and stopped), real worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.bench.race import make_cause
from patchit.intake.spool import Spool
from patchit.state.pg import PgConn, StateDbError, connect
from patchit.state.url import DEPLOYMENT_FILE
from tests.pg_cluster import PgCluster, pg_cluster, pg_ctl

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# a worker-like loop: the real Worker with the real fix-it and the library's FakeHarness (the
# race's context), polling until the file `stop` appears in its home
LOOP = """
import sys
from pathlib import Path
from patchit.bench.race import fake_context
from patchit.worker.worker import Worker
home = Path(sys.argv[1])
worker = Worker(home, say=lambda m: print(m, flush=True), make_context=fake_context)
stats = worker.run(once=False, poll_s=0.2, stop=(home / "stop").exists)
print(f"processed {stats.processed} bad {stats.bad}", flush=True)
"""


@pytest.fixture
def own_pg() -> Iterator[PgCluster]:
    """A cluster of this test's own: it is restarted or stopped under the other tests' feet."""
    with pg_cluster() as cluster:
        yield cluster


def _home(tmp_path: Path, pg: PgCluster) -> Path:
    pg.execute("create database state")
    home = tmp_path / "home"
    home.mkdir()
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/state"
    (home / DEPLOYMENT_FILE).write_text(f"[state]\nurl = {json.dumps(url)}\n")
    return home


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PATCHIT_STATE_URL"}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _spool(home: Path, tmp_path: Path, n: int) -> None:
    event = make_cause(tmp_path / "repos", n).model_dump(mode="json")
    with Spool.open(home) as spool:
        spool.put(event)


def _wait_done(pg: PgCluster, done: int, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = pg.execute("select count(*) from spool where state = 'done'", "state")
        if int(str(rows[0][0])) >= done:
            return
        if child.poll() is not None:
            out = child.stdout.read() if child.stdout else ""
            raise AssertionError(f"the worker exited {child.returncode}:\n{out}")
        time.sleep(0.2)
    raise AssertionError(f"{done} event(s) not processed in time")


def _wait_polling(pg: PgCluster, child: subprocess.Popen[str]) -> None:
    """Until the worker holds its two connections (spool, memory) and polls (a second)."""
    deadline = time.monotonic() + 60
    sql = (
        "select count(*) from pg_stat_activity where datname = 'state' and "
        "application_name = 'patchit'"
    )
    while time.monotonic() < deadline:
        assert child.poll() is None, f"the worker exited {child.returncode}"
        if int(str(pg.execute(sql)[0][0])) >= 2:
            time.sleep(1.0)
            assert child.poll() is None, f"the worker exited {child.returncode}"
            return
        time.sleep(0.2)
    raise AssertionError("the worker did not start polling")


def test_a_worker_loop_goes_on_across_a_server_restart(own_pg: PgCluster, tmp_path: Path) -> None:
    home = _home(tmp_path, own_pg)
    _spool(home, tmp_path, 0)
    child = subprocess.Popen(
        [sys.executable, "-c", LOOP, str(home)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=_env(),
    )  # fmt: skip
    try:
        _wait_done(own_pg, 1, child)
        pg_ctl(own_pg, "restart", "-m", "fast")  # every connection of the worker is cut
        time.sleep(1.0)  # the worker polls the restarted server a few times, idle
        began = time.monotonic()
        _spool(home, tmp_path, 1)
        _wait_done(own_pg, 2, child)
        after_fast = time.monotonic() - began
        pg_ctl(own_pg, "restart", "-m", "immediate")  # a crash: no goodbye to the clients
        began = time.monotonic()
        _spool(home, tmp_path, 2)
        _wait_done(own_pg, 3, child)
        print(f"next event healed {after_fast:.1f} s after a fast restart, "
              f"{time.monotonic() - began:.1f} s after an immediate one")  # fmt: skip
        (home / "stop").touch()
        out, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, out
    assert "processed 3 bad 0" in out
    rows = own_pg.execute("select status, count(*) from incidents group by status", "state")
    assert rows == [("fixed", 3)]


def test_a_server_that_stays_down_is_one_line_and_exit_1_after_the_bound(
    own_pg: PgCluster, tmp_path: Path
) -> None:
    home = _home(tmp_path, own_pg)
    env = _env(PATCHIT_STATE_RECONNECT_S="3")
    cmd = [sys.executable, "-m", "patchit", "--home", str(home), "worker", "--poll-s", "0.2"]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)  # fmt: skip
    try:
        _wait_polling(own_pg, child)
        stopped = time.monotonic()
        pg_ctl(own_pg, "stop", "-m", "fast")
        out, err = child.communicate(timeout=60)
        took = time.monotonic() - stopped
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("patchit: error: ") and "did not answer again within 3 s" in lines[0]
    assert "check the state server, then retry" in lines[0]
    assert 2.5 < took < 20, err
    print(lines[0], f"({took:.1f} s after the server stopped)")


def test_a_write_whose_connection_broke_is_not_sent_again(state_url: str, pg: PgCluster) -> None:
    conn = PgConn(connect(state_url), reopen=lambda: connect(state_url))
    other = PgConn(connect(state_url))
    try:
        conn.execute("create table t (n integer)")
        [[pid]] = conn.execute("select pg_backend_pid()").fetchall()
        other.execute("select pg_terminate_backend(?)", (pid,))
        time.sleep(0.2)  # the backend is gone; well under the idle check's second
        with pytest.raises(StateDbError) as info:
            # no pause for the idle check: the insert itself finds the connection gone
            conn.execute("insert into t values (1)")
        assert info.value.lost and info.value.reconnected and conn.reconnects == 1
        conn.execute("insert into t values (2)")  # the connection is back
        assert conn.execute("select n from t order by n").fetchall() == [(2,)]
        [[pid]] = conn.execute("select pg_backend_pid()").fetchall()
        other.execute("select pg_terminate_backend(?)", (pid,))
        time.sleep(1.2)  # idle: the write checks the connection first, and goes through
        conn.execute("insert into t values (3)")
        assert conn.execute("select n from t order by n").fetchall() == [(2,), (3,)]
        assert conn.reconnects == 2
    finally:
        conn.close()
        other.close()


def test_a_claim_cut_off_by_the_server_is_rolled_back_and_made_once_more(
    pg_home: Path, state_url: str
) -> None:
    other = PgConn(connect(state_url))
    with Spool.open(pg_home) as spool:
        first, second = spool.put({"n": 1}), spool.put({"n": 2})
        other.execute("update spool set state = 'taken', owner = 'w:1:1' where id = ?", (first,))
        assert spool.pg_conn is not None
        [[pid]] = spool.pg_conn.execute("select pg_backend_pid()").fetchall()
        cuts = []

        def is_dead(owner: str) -> bool:  # asked inside the claim's transaction
            if not cuts:
                cuts.append(owner)
                other.execute("select pg_terminate_backend(?)", (pid,))
                time.sleep(0.2)
            return owner == "w:1:1"

        taken = spool.claim("me:2:2", is_dead=is_dead)
        assert spool.pg_conn.reconnects == 1
        assert sorted(row.id for row in taken) == [first, second]
        assert {row.claims for row in taken} == {0}
        rows = other.execute("select owner, claims from spool order by id").fetchall()
        assert rows == [("me:2:2", 0), ("me:2:2", 0)]
    other.close()


def test_a_producer_whose_connection_is_lost_writes_the_fallback_and_never_reconnects(
    pg_home: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer given up on (the Airflow callback's deadline) has written its events to the
    fallback file: were its thread to reconnect and commit them, the worker would heal them
    twice. So a producer's connection is never made again; a worker's is."""
    from patchit.intake.spool import spool_events
    from patchit.intake.spool_files import fallback_path

    other = PgConn(connect(state_url))
    put_many = Spool.put_many
    opened: list[Spool] = []

    def cut_then_put(
        spool: Spool, events: list[dict[str, object]], owner: str | None = None
    ) -> list[int]:
        assert spool.pg_conn is not None
        opened.append(spool)
        [[pid]] = spool.pg_conn.execute("select pg_backend_pid()").fetchall()
        other.execute("select pg_terminate_backend(?)", (pid,))
        time.sleep(0.2)
        return put_many(spool, events, owner)

    monkeypatch.setattr(Spool, "put_many", cut_then_put)
    try:
        assert spool_events([{"n": 1}, {"n": 2}], pg_home) is False
        assert opened and opened[0].pg_conn is not None and opened[0].pg_conn.reconnects == 0
        assert other.execute("select count(*) from spool").fetchall() == [(0,)]
        lines = fallback_path(pg_home).read_text().splitlines()
        assert [json.loads(line)["n"] for line in lines] == [1, 2]
        # a worker's spool reconnects
        with Spool.open(pg_home) as spool:
            assert spool.pg_conn is not None and spool.pg_conn.reopen is not None
    finally:
        other.close()

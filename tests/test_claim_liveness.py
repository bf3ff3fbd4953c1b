"""Whose spool rows and incident leases are dead: a claimer is named as the sandbox sweep names
its runs (host, pid, start time, boot id and pid namespace), on SQLite and on Postgres alike.

A container beside this one shares the host name, not the pids: a live claimer in another pid
namespace keeps its claims (its pid means nothing here), a dead one's come back (seen from the
initial pid namespace, which sees every process of this boot), a reused pid does not keep a
dead claim, and an older patchit's owner (`host:pid[:start]`, no place) waits for its lease."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.intake.spool import Spool
from patchit.liveness import INIT_PID_NS, claimer_is_dead, process_start, this_place
from patchit.memory import Memory
from tests.pg_cluster import PgCluster

ROOT = Path(__file__).resolve().parents[1]
# a worker in a pid namespace of its own: claims every spool row and lease "inc-1" as patchit's
# worker and loop do, says so, and waits to be killed
CLAIMER = """
import sys, time
from pathlib import Path
from patchit.context import default_owner
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.worker import Worker
home = Path(sys.argv[1])
worker = Worker(home)
with Spool.open(home) as spool:
    rows = spool.claim(worker.owner, limit=10)
with Memory.open(home) as memory:
    assert memory.claim_incident("inc-1", default_owner(), ttl_s=3600)
print(len(rows), worker.owner, flush=True)
time.sleep(600)
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def home(
    request: pytest.FixtureRequest, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    if request.param == "sqlite":
        yield _patchit_home
        return
    from tests.state.conftest import database_url, fresh_database

    pg: PgCluster = request.getfixturevalue("pg")
    name = fresh_database(pg)
    monkeypatch.setenv("PATCHIT_STATE_URL", database_url(pg, name))
    yield _patchit_home
    pg.execute(f"drop database {name} with (force)")


def _unshare() -> list[str]:
    unshare = ["unshare", *(["-r"] if os.geteuid() != 0 else []), "-p", "-f", "--mount-proc"]
    assert shutil.which("unshare"), "unshare is required here: apt-get install util-linux"
    probe = subprocess.run([*unshare, "true"], capture_output=True)
    assert probe.returncode == 0, f"unshare -p cannot run here: {probe.stderr.decode().strip()}"
    return unshare


def _contained_claimer(home: Path) -> tuple[subprocess.Popen[str], str]:
    """A claimer in its own pid namespace that took the 3 spooled rows and lease inc-1."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHIT_HOME": str(home)}
    child = subprocess.Popen(
        [*_unshare(), sys.executable, "-c", CLAIMER, str(home)],
        stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line and line[0] == "3", line
    return child, line[1]


def _spool_three(home: Path) -> None:
    with Spool.open(home) as spool:
        for unit in ("a", "b", "c"):
            spool.put({"source": "airflow", "unit_id": unit})


def _me() -> str:
    from patchit.worker import Worker

    return Worker(Path("unused")).owner


def test_a_live_claimer_in_another_pid_namespace_keeps_its_rows_and_lease(home: Path) -> None:
    _spool_three(home)
    child, owner = _contained_claimer(home)
    try:
        assert owner.startswith(f"{socket.gethostname()}:")  # the same host name
        with Spool.open(home) as spool, Memory.open(home) as memory:
            assert spool.claim(_me(), limit=10) == []  # never stolen
            assert spool.counts() == {"taken": 3}
            assert memory.lease_is_live("inc-1")
            assert not memory.claim_incident("inc-1", _me(), ttl_s=60)
            assert "inc-1" not in memory.dead_leases()
        assert owner.split(":")[3] != this_place()  # named with its own pid namespace
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)


def test_a_dead_claimer_in_another_pid_namespace_is_seen_dead_from_the_initial_one(
    home: Path,
) -> None:
    here = this_place()
    assert here is not None
    if here.partition("/")[2] != INIT_PID_NS:
        pytest.skip("only the initial pid namespace sees into the others")  # CI runs there
    _spool_three(home)
    child, owner = _contained_claimer(home)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)  # unshare's: the claimer (its namespace's pid 1) dies just after
    deadline = time.monotonic() + 30
    while not claimer_is_dead(owner):
        assert time.monotonic() < deadline, f"{owner} is still seen alive"
        time.sleep(0.05)
    with Spool.open(home) as spool, Memory.open(home) as memory:
        assert "inc-1" in memory.dead_leases()
        assert memory.claim_incident("inc-1", _me(), ttl_s=60)
        assert len(spool.claim(_me(), limit=10)) == 3


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def test_claims_of_dead_or_unknown_owners(home: Path) -> None:
    place = this_place()
    assert place is not None  # /proc here
    host, me = socket.gethostname(), os.getpid()
    pidns = place.partition("/")[2]
    dead_pid = _dead_pid()
    dead = {
        "pid free": f"{host}:{dead_pid}:1:{place}",
        "pid reused": f"{host}:{me}:{int(process_start(me) or 0) + 1}:{place}",
    }
    unknown = {  # not known dead: their leases decide
        "another boot": f"{host}:{dead_pid}:1:00000000-0000-4000-8000-000000000000/{pidns}",
        "another host": f"elsewhere-7:{dead_pid}:1:{place}",
        "an older patchit's": f"{host}:{dead_pid}:1",
        "an older patchit's, no start": f"{host}:{dead_pid}",
    }
    live = {"this process": _me(), "a live pid": f"{host}:1:{process_start(1)}:{place}"}
    for why, owner in {**dead, **unknown, **live}.items():
        assert claimer_is_dead(owner) is (why in dead), why
    for label, owner in {**dead, **unknown}.items():
        with Spool.open(home) as spool, Memory.open(home) as memory:
            spool.drop(state="done")
            row = spool.put({"source": "airflow", "unit_id": label})
            incident = f"inc-{row}"
            assert spool.claim(owner, limit=10)[0].id == row
            assert memory.claim_incident(incident, owner, ttl_s=3600)
            taken = spool.claim(_me(), limit=10)
            assert [r.id for r in taken] == ([row] if label in dead else []), label
            assert memory.claim_incident(incident, _me(), ttl_s=60) is (label in dead), label
            if label in unknown:  # until its lease runs out
                assert [r.id for r in spool.claim(_me(), limit=10, lease_s=0)] == [row]
                memory.abandon_incident(incident, owner)  # (an expired lease)
                assert memory.claim_incident(incident, _me(), ttl_s=60)
            spool.mark_done(row)


def test_no_proc_judges_an_older_owner_by_its_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    import patchit.liveness as liveness

    monkeypatch.setattr(liveness, "this_place", lambda: None)
    assert claimer_is_dead(f"{socket.gethostname()}:{_dead_pid()}")
    assert not claimer_is_dead(f"{socket.gethostname()}:{os.getpid()}")


def test_a_process_it_cannot_read_keeps_a_claimer_of_another_namespace_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import patchit.liveness as liveness

    here = this_place()
    assert here is not None
    boot, _, pidns = here.partition("/")
    if pidns != INIT_PID_NS:
        pytest.skip("only the initial pid namespace sees into the others")  # CI runs there
    # a namespace that no longer exists: its claimer is dead ...
    gone = f"{socket.gethostname()}:7:1:{boot}/1"
    assert claimer_is_dead(gone)
    # ... unless some process of another namespace cannot be read (not root): not known
    child = subprocess.Popen([*_unshare(), "sleep", "60"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not _contained():
            assert time.monotonic() < deadline, "the contained process did not start"
            time.sleep(0.05)
        real = os.readlink

        def unreadable(path: str) -> str:
            if path.endswith("/ns/pid"):
                raise PermissionError(13, "Permission denied", path)
            return real(path)

        monkeypatch.setattr(liveness.os, "readlink", unreadable)
        assert not claimer_is_dead(gone)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)


def _contained() -> bool:
    """Whether a process of another pid namespace runs (its NSpid names two pids or more)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii") as handle:
                if any(ln.startswith("NSpid:") and len(ln.split()) > 2 for ln in handle):
                    return True
        except OSError:
            continue
    return False

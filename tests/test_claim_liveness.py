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
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.state.liveness import INIT_PID_NS, claimer_is_dead, process_start, this_place
from tests.pg_cluster import PgCluster

ROOT = Path(__file__).resolve().parents[1]
# a worker in a pid namespace of its own: claims every spool row and lease "inc-1" as patchit's
# worker and loop do, says so, and waits to be killed
CLAIMER = """
import sys, time
from pathlib import Path
from patchit.loop.context import default_owner
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.worker.worker import Worker
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
    from patchit.worker.worker import Worker

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
    _judge_sees_every_process()
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


def _judge_sees_every_process() -> None:
    """Skip, saying why, when this process (not root) cannot know a claimer of another pid
    namespace dead: some process of a child namespace is another user's, or /proc hides them.
    As root (CI) it always can: the test runs."""
    import patchit.state.liveness as liveness

    if os.geteuid() == 0:
        return
    if liveness._proc_hides_processes() is not False:
        pytest.skip("not root, and /proc hides other users' processes (hidepid): run as root")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii") as handle:
                contained = any(ln.startswith("NSpid:") and len(ln.split()) > 2 for ln in handle)
            if contained:
                os.readlink(f"/proc/{entry.name}/ns/pid")
        except PermissionError:
            pytest.skip(
                f"not root, and process {entry.name} of another pid namespace is another"
                " user's (unreadable): no claimer there is known dead; run as root"
            )
        except OSError:
            continue


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
    import patchit.state.liveness as liveness

    monkeypatch.setattr(liveness, "this_place", lambda: None)
    assert claimer_is_dead(f"{socket.gethostname()}:{_dead_pid()}")
    assert not claimer_is_dead(f"{socket.gethostname()}:{os.getpid()}")


def test_a_process_it_cannot_read_keeps_a_claimer_of_another_namespace_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    here = this_place()
    assert here is not None
    boot, _, pidns = here.partition("/")
    if pidns != INIT_PID_NS:
        pytest.skip("only the initial pid namespace sees into the others")  # CI runs there
    _judge_sees_every_process()
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

        monkeypatch.setattr(os, "readlink", unreadable)
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


# a claimer that says its owner id and waits to be killed (liveness only: no spool, no memory)
OWNER = (
    "import time; from patchit.state.liveness import claim_owner; print(claim_owner(), flush=True);"
)
OWNER += " time.sleep(600)"
JUDGE = (
    "import sys; from patchit.state.liveness import claimer_is_dead;"
    " print(claimer_is_dead(sys.argv[1]))"
)


def _initial_namespace_only() -> None:
    here = this_place()
    assert here is not None
    if here.partition("/")[2] != INIT_PID_NS:
        pytest.skip("only the initial pid namespace sees into the others")  # CI runs there


def _owner_in(prefix: list[str]) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [*prefix, sys.executable, "-c", OWNER],
        stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    assert child.stdout is not None
    owner = child.stdout.readline().strip()
    assert owner.count(":") == 3, owner
    return child, owner


def _kill(child: subprocess.Popen[str]) -> None:
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)


def test_a_proc_that_hides_other_users_processes_keeps_a_live_claimer_alive() -> None:
    # /proc mounted hidepid=2 (a hardened host): another user's processes are missing from its
    # listing, not unreadable; a judge that cannot see every process knows nobody dead
    _initial_namespace_only()
    if os.geteuid() != 0:
        pytest.skip("mounting /proc with hidepid=2 needs root")  # CI runs as root
    for tool, package in (("unshare", "util-linux"), ("setpriv", "util-linux"), ("mount", "mount")):
        assert shutil.which(tool), f"{tool} is required here: apt-get install {package}"
    child, owner = _owner_in(_unshare())  # root's, in a pid namespace of its own
    try:
        script = (
            "mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 --regid=65534"
            ' --clear-groups "$0" -c "$1" "$2"'
        )
        judged = subprocess.run(
            ["unshare", "-m", "sh", "-c", script, sys.executable, JUDGE, owner],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert judged.returncode == 0, judged.stderr
        assert judged.stdout.split() == ["False"], owner  # alive, as far as it can know
    finally:
        _kill(child)


def test_a_claimer_in_a_time_namespace_with_a_boot_time_offset_is_alive_until_it_dies() -> None:
    # a time namespace (CRIU restore, unshare -T): the claimer reads its start time with its
    # boot-time offset added; this process reads it without
    _initial_namespace_only()
    if not os.path.lexists("/proc/self/ns/time"):
        pytest.fail("this kernel has no time namespaces (Linux 5.6 or later is required)")
    _judge_sees_every_process()
    child, owner = _owner_in([*_unshare(), "-T", "--boottime", "100000"])
    try:
        assert int(owner.split(":")[2]) > 100000 * os.sysconf("SC_CLK_TCK")  # offset added
        assert not claimer_is_dead(owner)
    finally:
        _kill(child)
    deadline = time.monotonic() + 30
    while not claimer_is_dead(owner):  # and once it is gone, it is dead
        assert time.monotonic() < deadline, f"{owner} is still seen alive"
        time.sleep(0.05)


def test_no_nspid_line_in_proc_status_knows_no_claimer_of_another_namespace_dead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # kernels before 4.1 have no NSpid: every process would look like one of this namespace
    import patchit.state.liveness as liveness

    _initial_namespace_only()
    _judge_sees_every_process()
    boot = (this_place() or "").partition("/")[0]
    gone = f"{socket.gethostname()}:7:1:{boot}/1"  # a namespace that does not exist
    assert claimer_is_dead(gone)

    def status(pid: str) -> list[str]:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            return [ln for ln in handle if not ln.startswith("NSpid:")]

    monkeypatch.setattr(liveness, "_read_status", status, raising=False)
    assert not claimer_is_dead(gone)


def test_proc_is_read_once_per_claim_before_the_lock(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # three claimers of other pid namespaces (gone): one reading of /proc judges all three, and
    # it is made before the spool's write lock is taken, not once per owner inside it

    _initial_namespace_only()
    _judge_sees_every_process()
    boot = (this_place() or "").partition("/")[0]
    owners = [f"{socket.gethostname()}:7:1:{boot}/{n}" for n in (1, 2, 3)]
    with Spool.open(_patchit_home) as spool, Memory.open(_patchit_home) as memory:
        for n, owner in enumerate(owners):
            spool.put({"source": "airflow", "unit_id": f"u{n}"})
            assert spool.claim(owner, limit=1, is_dead=lambda _owner: False)
            assert memory.claim_incident(f"inc-{n}", owner, ttl_s=3600)
        conn = spool.conn
        assert isinstance(conn, sqlite3.Connection)
        real = os.scandir
        reads: list[bool] = []  # whether the spool was inside its transaction at each

        def scandir(path: str) -> object:
            if path == "/proc":
                reads.append(conn.in_transaction)
            return real(path)

        monkeypatch.setattr(os, "scandir", scandir)  # liveness reads /proc with it
        assert len(spool.claim(_me(), limit=10)) == 3
        assert reads == [False]
        reads.clear()
        assert sorted(memory.dead_leases()) == ["inc-0", "inc-1", "inc-2"]
        assert reads == [False]

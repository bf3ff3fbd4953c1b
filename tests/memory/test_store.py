"""The attempt memory on real SQLite files: schema, incidents, attempts, leases, crashes."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from patchit.config import PolicyConfig
from patchit.errors import BadInputError, MemoryStoreError
from patchit.events.model import UniversalFailureEvent
from patchit.memory import MIGRATIONS, AttemptOutcome, IncidentStatus, Memory
from patchit.memory.diffs import diff_hash
from patchit.patching.base import Edit, PatchCandidate
from patchit.patching.diffs import unified_diff
from patchit.policy.precheck import precheck
from patchit.state.dbfiles import quarantined


def event(
    unit: str = "orders", repo: str | None = "/srv/shop", **kw: object
) -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {
            "source": "dbt",
            "pipeline_id": "shop",
            "unit_id": f"model.shop.{unit}",
            "error_type": "Binder Error",
            "error_message": 'Referenced column "nme" not found',
            "repo_path": repo,
            **kw,
        }
    )


def candidate(tag: str = "rename_column", replace: str = "name") -> PatchCandidate:
    return PatchCandidate(
        strategy="binder_rename",
        tag=tag,
        edits=[Edit(path="models/orders.sql", search="nme", replace=replace)],
        rationale="the binder proposed it",
        tokens_in=10,
        tokens_out=5,
        cost_usd=0.01,
    )


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path / "home")
    yield mem
    mem.close()


def test_open_creates_the_file_in_wal_mode_with_migrations(tmp_path: Path) -> None:
    home = tmp_path / "nested" / "home"
    with Memory.open(home) as mem:
        assert mem.path == home / "memory" / "attempts.sqlite3"
        assert mem.db.journal_mode == "wal"
        assert {"events", "incidents", "attempts", "last_good", "leases"} <= set(
            mem.db.table_names()
        )
        index_cols = {tuple(ix.columns) for ix in mem.db.table("attempts").indexes}
        assert {("fingerprint", "diff_hash"), ("fingerprint", "tag")} <= index_cols
    with Memory.open(home) as again:  # reopening applies nothing twice
        rows = list(again.db.query("select id, name from _migrations order by id"))
        assert [r["id"] for r in rows] == list(range(1, len(MIGRATIONS) + 1))
        assert rows[0]["name"] == "m001_initial"


@pytest.mark.parametrize(
    "data", [b"", b"this is not a database, it is a text file" * 200], ids=["0-byte", "text"]
)
def test_a_damaged_memory_is_moved_aside_never_emptied_in_place(
    data: bytes, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with Memory.open(home) as mem:
        for i in range(3):
            mem.create_incident(event(f"m{i}"), "fp", f"ck{i}")
    path = home / "memory" / "attempts.sqlite3"
    for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        sidecar.unlink(missing_ok=True)
    path.write_bytes(data)
    with Memory.open(home) as mem:
        [notice] = mem.notices
        assert mem.list_incidents() == []  # a new memory, and it says so
    [moved] = quarantined(path)
    assert moved.read_bytes() == data
    assert re.fullmatch(r"attempts\.sqlite3\.corrupt-\d{8}T\d{4}Z", moved.name)
    assert f"{path} was damaged" in notice and str(moved) in notice
    with Memory.open(home) as again:
        assert again.notices == []  # said once, when found


def test_a_memory_damaged_inside_is_found_by_the_integrity_check(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory.open(home) as mem:
        inc = mem.create_incident(event(), "fp", "ck")
        mem.attach_events(inc.id, [(event(f"n{i}"), "fp") for i in range(300)], "ck")
    path = home / "memory" / "attempts.sqlite3"
    raw = bytearray(path.read_bytes())
    raw[4096 * 3 : 4096 * 3 + 200] = b"\xff" * 200  # a page's header overwritten
    path.write_bytes(bytes(raw))
    with Memory.open(home) as mem:
        assert len(mem.notices) == 1 and "damaged" in mem.notices[0]
    assert len(quarantined(path)) == 1


def _open_damaged(home: str) -> None:
    with Memory.open(Path(home)) as mem:
        mem.record_last_good(f"p{os.getpid()}", "a" * 40)


def test_workers_finding_one_damaged_memory_move_it_aside_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Memory.open(home).close()
    path = home / "memory" / "attempts.sqlite3"
    for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        sidecar.unlink(missing_ok=True)
    path.write_bytes(b"")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_open_damaged, args=(str(home),)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(quarantined(path)) == 1
    with Memory.open(home) as mem:
        assert len(list(mem.db.query("select * from last_good"))) == 4


def test_unwritable_home_is_a_memory_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(MemoryStoreError, match="cannot create the memory directory"):
        Memory.open(blocker / "home")


def test_create_incident_stores_the_event(memory: Memory) -> None:
    ev = event()
    incident = memory.create_incident(ev, "fp1", "ck1")
    assert re.fullmatch(r"\d{8}-[0-9a-f]{6}", incident.id)
    assert incident.id.startswith(datetime.now(UTC).strftime("%Y%m%d"))
    assert (incident.status, incident.events, incident.attempts) == (IncidentStatus.OPEN, 1, 0)
    assert incident.repo_path == "/srv/shop" and not incident.needs_human
    assert memory.events_for(incident.id) == [ev]


def test_open_or_attach_groups_by_cause_and_repo(memory: Memory) -> None:
    first, created = memory.open_or_attach(event("orders"), "fp-orders", "ck")
    assert created
    second, created = memory.open_or_attach(event("revenue"), "fp-revenue", "ck")
    assert not created and second.id == first.id and second.events == 2
    other_repo, created = memory.open_or_attach(event(repo="/srv/other"), "fp-orders", "ck")
    assert created and other_repo.id != first.id
    no_repo, created = memory.open_or_attach(event(repo=None), "fp-orders", "ck")
    assert created and memory.find_incident("ck", None) == no_repo
    other_cause, created = memory.open_or_attach(event(), "fp-orders", "ck-other")
    assert created and other_cause.id != first.id


def test_an_upgraded_memory_attaches_events_with_a_repo_url_to_its_old_incidents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory made before migration 8 has incidents without repo_url: a same-cause event
    that now carries one attaches to them (and teaches them the URL), not a second incident;
    an event without a URL (an older producer) still finds an incident that has one."""
    from patchit.memory import migrations

    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", MIGRATIONS[:7])
        Memory.open(tmp_path / "home").close()
    now = datetime.now(UTC).isoformat()
    with sqlite3.connect(tmp_path / "home" / "memory" / "attempts.sqlite3") as db:
        assert "repo_url" not in {r[1] for r in db.execute("pragma table_info(incidents)")}
        db.execute(
            "insert into incidents (id, fingerprint, cause_key, repo_path, status, summary,"
            " created_utc, updated_utc, needs_human) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("20260101-abcdef", "fp-orders", "ck", "/srv/shop", "escalated", "", now, now, 1),
        )
    url = "github.com/acme/shop"
    mem = Memory.open(tmp_path / "home")
    try:
        assert mem.get_incident("20260101-abcdef").repo_url is None
        again, created = mem.open_or_attach(event("orders", repo_url=url), "fp-orders", "ck")
        assert not created and again.id == "20260101-abcdef" and again.repo_url == url
        assert again.status == IncidentStatus.ESCALATED
        plain, created = mem.open_or_attach(event("revenue"), "fp-revenue", "ck")
        assert not created and plain.id == again.id and plain.events == 2
        elsewhere, created = mem.open_or_attach(
            event("orders", repo="/home/b/shop", repo_url=url), "fp-orders", "ck"
        )
        assert not created and elsewhere.id == again.id
    finally:
        mem.close()


def test_the_same_event_delivered_twice_is_stored_once(memory: Memory) -> None:
    ev = event()
    memory.open_or_attach(ev, "fp", "ck")
    again, created = memory.open_or_attach(ev, "fp", "ck")
    assert not created and again.events == 1


def test_a_storm_attaches_in_one_batch_and_redelivery_is_ignored(memory: Memory) -> None:
    first = event("t0")
    incident, _ = memory.open_or_attach(first, "fp", "storm")
    storm = [(event(f"t{n}"), "fp") for n in range(1, 1200)]
    memory.attach_events(incident.id, storm, "storm")
    memory.attach_events(incident.id, [*storm[:10], (first, "fp")], "storm")  # delivered again
    assert memory.get_incident(incident.id).events == 1200
    assert {e.unit_id for e in memory.events_for(incident.id)} == {
        f"model.shop.t{n}" for n in range(1200)
    }


def test_recurrence_after_the_window_opens_a_new_incident(memory: Memory) -> None:
    old = memory.create_incident(event(), "fp", "ck")
    memory.transition(old.id, "fixed")
    assert memory.find_incident("ck", "/srv/shop") == memory.get_incident(old.id)  # any status
    stale = (datetime.now(UTC) - timedelta(days=20)).isoformat()
    memory.db.execute("update incidents set updated_utc = ? where id = ?", [stale, old.id])
    assert memory.find_incident("ck", "/srv/shop") is None
    assert memory.find_incident("ck", "/srv/shop", window_days=30) is not None
    fresh, created = memory.open_or_attach(event(), "fp", "ck")
    assert created and fresh.id != old.id


def test_update_get_and_list_incidents(memory: Memory) -> None:
    a = memory.create_incident(event("a"), "fa", "ca")
    b = memory.create_incident(event("b"), "fb", "cb")
    updated = memory.transition(
        a.id, "escalated", classification="data_issue", needs_human=True, summary="dupes"
    )
    assert updated.status is IncidentStatus.ESCALATED and updated.needs_human
    assert updated.updated_utc >= a.updated_utc
    assert [i.id for i in memory.list_incidents()] == [b.id, a.id]
    with pytest.raises(TypeError, match="created_utc"):
        memory.update_incident(a.id, created_utc="x")
    with pytest.raises(TypeError, match="status"):
        memory.update_incident(b.id, status="fixed")  # only through the lifecycle's table
    with pytest.raises(ValueError):
        memory.transition(b.id, "sort of fixed")
    with pytest.raises(BadInputError, match=r"'20000101-000000'.*patchit incidents"):
        memory.get_incident("20000101-000000")
    with pytest.raises(BadInputError):
        memory.update_incident("20000101-000000", summary="x")


def test_attempts_are_recorded_and_queried_per_fingerprint(memory: Memory) -> None:
    inc = memory.create_incident(event(), "fp", "ck")
    diff = unified_diff("models/orders.sql", "select nme\n", "select name\n")
    first = memory.record_attempt(
        inc.id, "fp", candidate(), diff, AttemptOutcome.FAILED, reason="still fails",
        verification_output="Binder Error", duration_ms=1200,
    )  # fmt: skip
    memory.record_refusal(inc.id, "fp", candidate("fix_ref", "nm"), "x", reason="policy")
    memory.record_attempt(inc.id, "fp", candidate("cast", "nm2"), "y", "harness_limit")
    records = memory.attempts_for(inc.id)
    assert records[0].id == first and len(records) == 3
    assert records[0].files == ["models/orders.sql"] and records[0].diff_hash == diff_hash(diff)
    assert (records[0].tokens_in, records[0].cost_usd, records[0].duration_ms) == (10, 0.01, 1200)
    assert memory.get_incident(inc.id).attempts == 3
    assert memory.attempt_count("fp") == 1  # refused and harness_limit never reached a verdict
    assert memory.attempt_count("other") == 0
    assert [(h.tag, h.outcome) for h in memory.history("fp")] == [
        ("rename_column", "failed"), ("fix_ref", "refused"), ("cast", "harness_limit"),
    ]  # fmt: skip
    shifted = unified_diff("models/orders.sql", "-- x\nselect nme\n", "-- x\nselect name\n")
    assert memory.seen_diff("fp", diff_hash(shifted))
    assert not memory.seen_diff("fp", diff_hash("x"))  # refused: not tried
    assert not memory.seen_diff("other-fp", diff_hash(diff))
    assert memory.failed_tags("fp") == {"rename_column"}
    with pytest.raises(BadInputError, match="no-such-incident"):
        memory.record_attempt("no-such-incident", "fp", candidate(), diff, "failed")


def test_a_screened_out_diff_is_seen_but_spends_no_attempt_and_bars_no_bucket(
    memory: Memory,
) -> None:
    inc = memory.create_incident(event(), "fp", "ck")
    diff = unified_diff("models/orders.sql", "select nme\n", "select nmae\n")
    memory.record_attempt(
        inc.id, "fp", candidate(replace="nmae"), diff, AttemptOutcome.SCREENED_OUT,
        reason="screen: Binder Error", verification_output="$ screen: EXPLAIN", duration_ms=3,
    )  # fmt: skip
    assert memory.seen_diff("fp", diff_hash(diff))  # never tried twice
    assert memory.attempt_count("fp") == 0  # it cost a screen, not a run
    assert memory.failed_tags("fp") == set()  # the bucket's next candidate may still bind
    assert [(h.outcome, h.reason) for h in memory.history("fp")] == [
        ("screened_out", "screen: Binder Error")
    ]
    assert memory.attempts_for(inc.id)[0].outcome is AttemptOutcome.SCREENED_OUT


def test_a_diff_held_for_review_is_no_repeat_a_failed_one_is(
    memory: Memory, tmp_path: Path
) -> None:
    """A revert sent to review passed: once the human lets reverts land (`revert = "allow"`),
    or a later incident meets the same failure, it must be verified again, not refused as a
    repeated failure. Only a diff that failed stays barred."""
    inc = memory.create_incident(event(), "fp", "ck")
    held = unified_diff("models/orders.sql", "select nme\n", "select name\n")
    memory.record_attempt(
        inc.id, "fp", candidate("partial_revert:ab12"), held, AttemptOutcome.NEEDS_REVIEW,
        reason="needs review: reverts your change: renamed column name to nme",
    )  # fmt: skip
    assert not memory.seen_diff("fp", diff_hash(held))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "orders.sql").write_text("select nme\n")
    assert precheck(candidate("partial_revert:ab12"), held, "fp", tmp_path, PolicyConfig(),
                    memory) is None  # fmt: skip
    failed = unified_diff("models/orders.sql", "select nme\n", "select nm\n")
    memory.record_attempt(inc.id, "fp", candidate("fix_ref", "nm"), failed, "failed")
    assert memory.seen_diff("fp", diff_hash(failed))
    assert memory.attempt_count("fp") == 2  # both reached a verdict


def test_a_diff_landed_for_another_incident_is_no_repeat_there(
    memory: Memory, tmp_path: Path
) -> None:
    """The same rename made again on a new commit, after the first incident's fix branch was
    thrown away: the new incident has the same fingerprint, and the fix that passed and landed
    there is a new experiment here (found on a public project: the ref fix was refused as a
    repeated diff, and a worse candidate went forward). In its own incident it stays seen."""
    first = memory.create_incident(event(), "fp", "ck")
    fix = unified_diff("models/orders.sql", "select nme\n", "select name\n")
    attempt = memory.record_attempt(first.id, "fp", candidate("fix_ref"), fix, "verified")
    memory.mark_landed(attempt, "patchit/first")
    again = memory.create_incident(event(), "fp", "ck2")
    assert memory.seen_diff("fp", diff_hash(fix))  # no incident named: as before
    assert memory.seen_diff("fp", diff_hash(fix), first.id)
    assert not memory.seen_diff("fp", diff_hash(fix), again.id)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "orders.sql").write_text("select nme\n")
    assert precheck(candidate("fix_ref"), fix, "fp", tmp_path, PolicyConfig(), memory,
                    again.id) is None  # fmt: skip
    assert "repeated diff" in (precheck(candidate("fix_ref"), fix, "fp", tmp_path,
                                        PolicyConfig(), memory, first.id) or "")  # fmt: skip
    # a diff that failed in the first incident stays barred in the second
    failed = unified_diff("models/orders.sql", "select nme\n", "select nm\n")
    memory.record_attempt(first.id, "fp", candidate("other"), failed, "failed")
    assert memory.seen_diff("fp", diff_hash(failed), again.id)


def test_last_good_commit(memory: Memory) -> None:
    assert memory.last_good("shop") is None
    memory.record_last_good("shop", "a" * 40)
    memory.record_last_good("shop", "b" * 40)
    assert memory.last_good("shop") == "b" * 40


def test_leases_keep_a_second_worker_out(memory: Memory, tmp_path: Path) -> None:
    inc = memory.create_incident(event(), "fp", "ck")
    with Memory.open(tmp_path / "home") as other:
        assert memory.claim_incident(inc.id, "worker-a", ttl_s=60)
        assert not other.claim_incident(inc.id, "worker-b", ttl_s=60)
        assert memory.claim_incident(inc.id, "worker-a", ttl_s=60)  # renewal
        other.release_incident(inc.id, "worker-b")  # not its lease: no effect
        assert not other.claim_incident(inc.id, "worker-b", ttl_s=60)
        memory.release_incident(inc.id, "worker-a")
        assert other.claim_incident(inc.id, "worker-b", ttl_s=0.05)
        time.sleep(0.1)
        assert memory.claim_incident(inc.id, "worker-a", ttl_s=60)  # expired lease is free


def _write_then_die(home: str, out: Connection) -> None:
    mem = Memory.open(Path(home))
    ev = event()
    out.send((mem.create_incident(ev, "fp", "ck").id, ev.event_id))  # synchronous, unlike a Queue
    mem.db.conn.execute("BEGIN IMMEDIATE")
    mem.db.conn.execute("update incidents set summary = 'half done'")
    os.kill(os.getpid(), signal.SIGKILL)  # dies holding an open write transaction


def test_committed_rows_survive_a_killed_writer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Memory.open(home).close()
    ctx = mp.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_write_then_die, args=(str(home), sender))
    proc.start()
    assert receiver.poll(30)
    incident_id, event_id = receiver.recv()
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    with Memory.open(home) as after:
        assert after.get_incident(incident_id).summary == ""
        assert [e.event_id for e in after.events_for(incident_id)] == [event_id]
        after.update_incident(incident_id, summary="written after the crash")  # lock is free


def test_locked_database_is_reported_not_hung(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Memory.open(home).close()
    blocker = sqlite3.connect(home / "memory" / "attempts.sqlite3")
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with (
            Memory.open(home, busy_timeout_s=0.2) as mem,
            pytest.raises(MemoryStoreError, match="another process held it"),
        ):
            mem.record_last_good("shop", "c" * 40)
    finally:
        blocker.rollback()
        blocker.close()


def test_a_lease_of_a_dead_process_on_this_host_is_taken_over(tmp_path: Path) -> None:
    import socket
    import subprocess

    from patchit.state.liveness import claim_owner, process_start, this_place

    memory = Memory.open(tmp_path)
    inc = memory.create_incident(event(), "fp", "ck")
    gone = subprocess.Popen(["true"])
    gone.wait()
    host, place = socket.gethostname(), this_place()
    assert memory.claim_incident(inc.id, f"{host}:{gone.pid}:1:{place}", ttl_s=3600)
    assert memory.claim_incident(inc.id, claim_owner(), ttl_s=3600)
    # a live owner keeps its lease
    assert not memory.claim_incident(inc.id, f"{host}:1:{process_start(1)}:{place}", ttl_s=3600)


def test_an_incident_knows_which_commits_its_events_came_from(memory: Memory) -> None:
    first = event(commit="a" * 40, error_message="the sha " + "c" * 40 + " in a message")
    incident, _ = memory.open_or_attach(first, "fp", "ck")
    odd = event(commit="50%_off!", error_message="x")
    memory.open_or_attach(odd, "fp", "ck")
    assert memory.has_event_from(incident.id, "a" * 40)
    assert not memory.has_event_from(incident.id, "a" * 40, besides=first.event_id)
    assert not memory.has_event_from(incident.id, "c" * 40)  # in the text, not the commit
    assert not memory.has_event_from(incident.id, "A" * 40)  # SQLite's LIKE ignores case
    assert memory.has_event_from(incident.id, "50%_off!")  # LIKE's wildcards taken literally
    assert not memory.has_event_from(incident.id, "50xyoff!")
    assert not memory.has_event_from(incident.id, "b" * 40)


def test_the_commit_lookup_reads_every_event_only_when_the_text_is_everywhere(
    memory: Memory,
) -> None:
    # 40 events whose messages all name the sha: past the first rows, it reads them all
    sha = "d" * 40
    incident = None
    for n in range(40):
        incident, _ = memory.open_or_attach(
            event(commit=f"{n:040x}", error_message=f"after {sha}"), "fp", "ck"
        )
    assert incident is not None
    assert not memory.has_event_from(incident.id, sha)
    assert memory.has_event_from(incident.id, f"{39:040x}")

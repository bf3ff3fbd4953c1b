"""One bad event never stalls the worker: it is marked bad with its reason and the rest of
its batch goes on; rows of a worker that died go back to the queue; a memory that cannot be
written gives the batch back instead of marking it bad; `patchit spool` lists, retries and
drops rows."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from patchit.cli.main import cli
from patchit.errors import MemoryStoreError
from patchit.intake.spool import MAX_CLAIMS, Spool, append_fallback, fallback_path
from patchit.intake.spool_files import MAX_LINE_BYTES
from patchit.memory import Memory
from patchit.state.liveness import claim_owner, this_place
from patchit.worker.worker import Worker
from tests.test_crash_safety import KILLED, killed
from tests.test_worker import OUTAGE, airflow_event, patchit, spool


def surrogate_event(task: str) -> dict[str, Any]:
    # an Airflow error message holding a file name that is not UTF-8
    message = "No such file: " + "caf\udce9.csv"
    return airflow_event("orders", task, "FileNotFoundError", message)


def states(home: Path) -> dict[str, int]:
    with Spool.open(home) as s:
        return s.counts()


def test_a_lone_surrogate_does_not_stall_its_batch(_patchit_home: Path) -> None:
    spool(
        _patchit_home,
        [
            airflow_event("dag_a", "t1", "OperationalError", OUTAGE),
            surrogate_event("load"),
            airflow_event("dag_b", "t2", "OperationalError", OUTAGE),
        ],
    )
    stats = Worker(_patchit_home).run(once=True)
    counts = states(_patchit_home)
    assert "taken" not in counts and "pending" not in counts, counts
    assert stats.processed + stats.bad == 3
    with Spool.open(_patchit_home) as s:
        done = [json.loads(r["payload"])["unit_id"] for r in s.rows("done")]
        bad = s.rows("bad")
    assert {"t1", "t2"} <= set(done)
    for row in bad:  # the poison row, if it is one, says why
        assert "UnicodeEncodeError" in row["reason"], row["reason"]


def test_a_poison_event_is_bad_with_its_reason_and_the_rest_is_processed(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import patchit.worker.worker
    from patchit.memory.fingerprint import cause_key

    def poisoned(event: Any) -> str:
        if event.unit_id == "poison":
            raise UnicodeEncodeError("utf-8", "caf\udce9", 3, 4, "surrogates not allowed")
        return cause_key(event)

    monkeypatch.setattr(patchit.worker.worker, "cause_key", poisoned)
    events = [airflow_event(f"dag_{i}", f"t{i}", "OperationalError", OUTAGE) for i in range(5)]
    events.insert(2, airflow_event("dag_x", "poison", "KeyError", "'amout'"))
    spool(_patchit_home, events)
    lines: list[str] = []
    stats = Worker(_patchit_home, say=lines.append).run(once=True)
    assert (stats.processed, stats.bad) == (5, 1)
    assert states(_patchit_home) == {"done": 5, "bad": 1}
    with Spool.open(_patchit_home) as s:
        [bad] = s.rows("bad")
    assert json.loads(bad["payload"])["unit_id"] == "poison"
    assert "internal error UnicodeEncodeError" in bad["reason"]
    assert any(f"spool row {bad['id']}" in line for line in lines)
    # the next run has nothing left hanging: 0 processed because 0 are waiting
    assert Worker(_patchit_home).run(once=True).processed == 0
    assert states(_patchit_home) == {"done": 5, "bad": 1}


def dead_owner() -> str:
    """A worker of this host, boot and pid namespace that died (its pid is free)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return f"{socket.gethostname()}:{gone.pid}:1:{this_place()}"


def test_rows_taken_by_a_worker_that_died_are_processed_by_the_next(_patchit_home: Path) -> None:
    events = [airflow_event("dag", f"t{i}", "OperationalError", OUTAGE) for i in range(3)]
    spool(_patchit_home, events)
    with Spool.open(_patchit_home) as s:
        assert len(s.claim(claim_owner(), limit=10)) == 3  # a live worker (this process)
    assert Worker(_patchit_home).run(once=True).processed == 0  # it keeps them
    with Spool.open(_patchit_home) as s:
        s.conn.execute("update spool set owner = ?", (dead_owner(),))  # ... until it dies
    stats = Worker(_patchit_home).run(once=True)  # its lease is an hour: not expired yet
    assert (stats.processed, stats.bad) == (3, 0)
    assert states(_patchit_home) == {"done": 3}


def code_errors(n: int) -> list[dict[str, Any]]:
    """`n` failures of `n` causes: each row is a group of its own."""
    return [airflow_event(f"dag_{i}", f"t{i}", "KeyError", f"'col{i}'") for i in range(n)]


def worker_killed_at(home: Path, unit: str) -> None:
    """Run a worker in a child process that dies (no finally, as under SIGKILL) when it
    starts processing `unit`'s row, after the rows before it."""

    def run() -> None:
        recorded = Worker._record_group

        def dying(self: Worker, key: str, events: list[Any], memory: Memory) -> None:
            if events[0].unit_id == unit:
                os._exit(KILLED)
            recorded(self, key, events, memory)

        Worker._record_group = dying  # type: ignore[method-assign]
        Worker(home).run(once=True)

    assert killed(run) == KILLED


def claims(home: Path) -> dict[str, int]:
    with Spool.open(home) as s:
        return {json.loads(r["payload"])["unit_id"]: r["claims"] for r in s.rows()}


def test_a_kill_counts_against_the_row_being_processed_not_its_batch(_patchit_home: Path) -> None:
    spool(_patchit_home, code_errors(10))
    for k in range(2, 2 + MAX_CLAIMS):  # five kills, each while another row is processed
        worker_killed_at(_patchit_home, f"t{k}")
    assert claims(_patchit_home) == {f"t{i}": int(2 <= i < 2 + MAX_CLAIMS) for i in range(10)}
    stats = Worker(_patchit_home).run(once=True)
    assert (stats.processed, stats.bad) == (10, 0)
    assert states(_patchit_home) == {"done": 10}


def test_a_row_whose_workers_keep_dying_becomes_bad_and_the_rest_is_processed(
    _patchit_home: Path,
) -> None:
    spool(_patchit_home, code_errors(10))
    for _ in range(MAX_CLAIMS):
        worker_killed_at(_patchit_home, "t3")
    assert claims(_patchit_home)["t3"] == MAX_CLAIMS
    stats = Worker(_patchit_home).run(once=True)
    assert (stats.processed, stats.bad) == (9, 0)  # marked bad when claimed: never processed
    assert states(_patchit_home) == {"done": 9, "bad": 1}
    with Spool.open(_patchit_home) as s:
        [bad] = s.rows("bad")
    assert json.loads(bad["payload"])["unit_id"] == "t3"
    assert f"died {MAX_CLAIMS} times while processing it" in bad["reason"]


def test_a_broken_memory_gives_the_batch_back_and_stops(_patchit_home: Path) -> None:
    spool(
        _patchit_home, [airflow_event("dag", f"t{i}", "OperationalError", OUTAGE) for i in range(4)]
    )
    Memory.open(_patchit_home).close()
    db = sqlite3.connect(_patchit_home / "memory" / "attempts.sqlite3")
    db.execute("drop table events")  # a schema the worker cannot write to
    db.commit()
    db.close()
    with pytest.raises(MemoryStoreError, match="no such table: events"):
        Worker(_patchit_home).run(once=True)
    assert states(_patchit_home) == {"pending": 4}  # not bad: not the events' fault
    with Spool.open(_patchit_home) as s:
        assert all(r["claims"] == 0 for r in s.rows())


def test_worker_cli_says_the_memory_error_in_one_line_and_exits_1(_patchit_home: Path) -> None:
    spool(_patchit_home, [airflow_event("dag", "t", "OperationalError", OUTAGE)])
    Memory.open(_patchit_home).close()
    db = sqlite3.connect(_patchit_home / "memory" / "attempts.sqlite3")
    db.execute("drop table incidents")
    db.commit()
    db.close()
    result = subprocess.run(
        [sys.executable, "-m", "patchit", "worker", "--once"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "no such table: incidents" in errors[0]


def test_spool_list_retry_and_drop(_patchit_home: Path) -> None:
    spool(
        _patchit_home,
        [airflow_event("dag", "ok", "OperationalError", OUTAGE), {"source": "airflow"}],
    )
    Worker(_patchit_home).run(once=True)
    runner = CliRunner()
    listed = runner.invoke(cli, ["spool", "list"])
    assert listed.exit_code == 0, listed.output
    assert "1 done" in listed.output and "1 bad" in listed.output
    assert "does not match the event schema" in listed.output
    as_json = json.loads(runner.invoke(cli, ["spool", "list", "--state", "bad", "--json"]).output)
    [bad] = as_json
    retried = runner.invoke(cli, ["spool", "retry"])
    assert retried.exit_code == 0 and "1 row(s) back to pending" in retried.output
    assert states(_patchit_home) == {"done": 1, "pending": 1}
    assert runner.invoke(cli, ["spool", "drop"]).exit_code == 2  # names nothing
    dropped = runner.invoke(cli, ["spool", "drop", str(bad["id"])])
    assert dropped.exit_code == 0 and "1 row(s) dropped" in dropped.output
    assert runner.invoke(cli, ["spool", "drop", "--state", "done"]).exit_code == 0
    assert states(_patchit_home) == {}


def test_a_fallback_line_nested_1000_deep_is_quarantined_and_the_118_behind_it_processed(
    _patchit_home: Path,
) -> None:
    fallback = fallback_path(_patchit_home)
    fallback.parent.mkdir(parents=True)
    fallback.write_text("[" * 1000 + "]" * 1000 + "\n")  # the json module's recursion limit
    for i in range(118):
        event = airflow_event(f"dag_{i}", f"t{i}", "OperationalError", OUTAGE)
        append_fallback(event, _patchit_home)
    stats = Worker(_patchit_home).run(once=True)
    assert stats.processed == 118
    assert states(_patchit_home) == {"done": 118, "bad": 1}
    assert not list(fallback.parent.glob("fallback.jsonl*"))  # imported: nothing left to retry
    listed = CliRunner().invoke(cli, ["spool", "list", "--state", "bad"])
    assert listed.exit_code == 0, listed.output
    assert "line 1 unreadable (nested too deep)" in listed.output
    assert Worker(_patchit_home).run(once=True).processed == 0  # and it is not retried


def test_a_fallback_line_longer_than_any_event_is_moved_aside_whole(_patchit_home: Path) -> None:
    fallback = fallback_path(_patchit_home)
    fallback.parent.mkdir(parents=True)
    huge = b'{"source": "airflow", "error_message": "' + b"x" * MAX_LINE_BYTES + b'"}\n'
    fallback.write_bytes(huge)
    append_fallback(airflow_event("dag", "t", "OperationalError", OUTAGE), _patchit_home)
    with Spool.open(_patchit_home) as s:
        assert s.import_fallback() == 2
        [bad] = s.rows("bad")
        assert s.counts() == {"bad": 1, "pending": 1}
    [aside] = (fallback.parent / "damaged").iterdir()
    assert aside.read_bytes() == huge and str(aside) in bad["reason"]
    assert len(bad["payload"]) < 5000


def test_spool_retry_and_drop_act_on_exactly_the_rows_named_or_none(_patchit_home: Path) -> None:
    spool(_patchit_home, code_errors(4))
    with Spool.open(_patchit_home) as s:
        first, second, third, fourth = (r["id"] for r in s.rows())
        s.mark_bad(first, "poison")
        s.mark_done(second)
        s.claim(claim_owner(), limit=1)  # the third: taken by a live worker (this process)
    before = states(_patchit_home)
    for args, line in [
        (["retry", str(first), "999"], "spool row 999 is not in the spool"),
        (["retry", str(first), str(third)], f"spool row {third} is being processed by a live"),
        (["retry", str(fourth)], f"spool row {fourth} is pending already"),
        (["drop", str(first), "999"], "spool row 999 is not in the spool"),
        (["drop", "99999999999999999999"], "is not in the range"),
        (["drop", str(first), "--state", "done"], "not both"),
    ]:
        result = patchit("spool", *args)  # the real CLI, as a user runs it
        assert result.returncode == 2 and line in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr and states(_patchit_home) == before
    retried = patchit("spool", "retry", str(first), str(second))
    assert retried.returncode == 0 and "2 row(s) back to pending" in retried.stdout
    dropped = patchit("spool", "drop", str(fourth))
    assert dropped.returncode == 0 and "1 row(s) dropped" in dropped.stdout
    with Spool.open(_patchit_home) as s:
        assert {r["id"]: r["state"] for r in s.rows()} == {
            first: "pending", second: "pending", third: "taken",
        }  # fmt: skip


def test_an_incident_that_cannot_be_resumed_is_said_once_and_the_spool_goes_on(
    _patchit_home: Path,
) -> None:
    from patchit.events.model import UniversalFailureEvent
    from patchit.memory.fingerprint import cause_key, error_fingerprint

    event = UniversalFailureEvent.model_validate(code_errors(1)[0])
    with Memory.open(_patchit_home) as memory:
        incident = memory.create_incident(event, error_fingerprint(event), cause_key(event))
        memory.db.execute('update events set json = \'{"not": "an event"}\'')
        memory.db.conn.commit()
        assert memory.claim_incident(incident.id, dead_owner(), ttl_s=3600)  # its run died
    spool(_patchit_home, code_errors(3)[1:])
    lines: list[str] = []
    stats = Worker(_patchit_home, say=lines.append).run(once=True)
    assert (stats.processed, stats.bad) == (2, 0)
    [said] = [line for line in lines if "not resumed" in line]
    assert said == (
        f"incident {incident.id}: not resumed (internal error ValidationError: 4 validation "
        "errors for UniversalFailureEvent); left open"
    )
    again: list[str] = []
    Worker(_patchit_home, say=again.append).run(once=True)
    assert not any(incident.id in line for line in again), again  # not tried on every run

"""What a storm costs per event: a worker taking 10,000 spooled failures of one outage in
batches must not pay per event what it can pay per batch (the alert storm slowed from 3.9 s to
9.1 s for 10,000 events). Real git, real SQLite, the real worker; the calls are counted on the
real functions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import patchit.events.model
import patchit.intake.checkouts
import patchit.loop.loop
import patchit.memory.fingerprint
import patchit.reports.refresh
import patchit.worker.worker
from patchit.bench.perf_airflow import AirflowPerfResult, measure_storm
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.intake.spool import Spool
from patchit.memory import Memory


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_a_storm_pays_per_batch_not_per_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = counted(monkeypatch, patchit.events.model, "environment_secrets")
    reports = counted(monkeypatch, patchit.loop.loop, "refresh_report")
    reports_after = counted(monkeypatch, patchit.worker.worker, "refresh_report")
    claims = counted(monkeypatch, Spool, "claim")
    # one outage's message normalised once, not three times per event (cause, storm, fingerprint)
    patchit.memory.fingerprint._normalised.cache_clear()
    normalised = counted(monkeypatch, patchit.memory.fingerprint, "_normalise")
    deployments = counted(monkeypatch, patchit.intake.checkouts, "load_deployment")
    commits = counted(monkeypatch, patchit.worker.worker, "run_git")  # is the commit there?
    result = AirflowPerfResult(airflow_version="", calls=0, storm_events=400, runs=1)
    measure_storm(tmp_path, 400, result)  # one incident holding the 400 events, or it raises
    batches = 400 // 50
    assert result.storm_incident["events"] == 400
    assert len(secrets) <= 2 * batches, len(secrets)  # the environment read once per batch
    # the report rendered once the storm is in (it was once per batch: 17% of the storm),
    # holding every event
    assert len(reports) + len(reports_after) <= 2, (len(reports), len(reports_after))
    with Memory.open(tmp_path / "storm-home") as memory:
        [incident] = memory.list_incidents()
    assert incident.report_json is not None
    assert json.loads(Path(incident.report_json).read_text())["events"] == 400
    # claims grow while batches only attach: 50, 100, 200, the rest, then the empty one
    assert len(claims) < batches, len(claims)
    assert len(normalised) <= batches, len(normalised)
    assert deployments == [], len(deployments)  # events named by their path: nothing to map
    assert len(commits) <= 1, len(commits)  # asked once, not per batch


def vm_steps(conn: sqlite3.Connection, call: Callable[[], object]) -> int:
    """SQLite's virtual machine instructions `call` runs on `conn` (in thousands)."""
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0  # go on

    conn.set_progress_handler(step, 1000)
    try:
        call()
    finally:
        conn.set_progress_handler(None, 0)
    return steps[0]


def claim_cost(home: Path, pending: int) -> int:
    """What claiming one batch of 50 costs with `pending` rows waiting (one of them charged
    by a worker that died, as after a kill)."""
    with Spool.open(home) as spool:
        payload = json.dumps({"source": "airflow", "error_message": "x" * 2000})
        spool.conn.executemany(
            "insert into spool (created_utc, source, payload) values ('t', 'airflow', ?)",
            [(payload,)] * pending,
        )
        spool.conn.execute("update spool set claims = 1, owner = 'gone' where id = 7")
        taken: list[Any] = []
        cost = vm_steps(spool.conn, lambda: taken.extend(spool.claim("w", limit=50)))
        assert [row.id for row in taken] == list(range(1, 51))  # oldest first, as before
        return cost


def test_a_claim_does_not_read_every_pending_row(tmp_path: Path) -> None:
    """A claim sorted every pending row (and read its payload) to take 50: a storm's 10,000
    rows were read 200 times over."""
    small = claim_cost(tmp_path / "small", 500)
    large = claim_cost(tmp_path / "large", 10_000)
    assert large < 2 * small + 10, (small, large)


def test_a_claim_takes_expired_and_pending_rows_oldest_first(tmp_path: Path) -> None:
    with Spool.open(tmp_path) as spool:
        ids = [spool.put({"source": "airflow", "unit_id": f"t{i}"}) for i in range(6)]
        first = spool.claim("dead", limit=2)  # rows 1 and 2: their lease runs out
        assert [r.id for r in first] == ids[:2]
        again = spool.claim("w", limit=3, lease_s=0)
        assert [r.id for r in again] == ids[:3]
        assert [r.id for r in spool.claim("w2", limit=10)] == ids[3:]


def test_the_newest_event_is_read_without_reading_the_others(tmp_path: Path) -> None:
    """`latest_event` sorted every event of the incident (at each batch of a storm)."""

    def cost(home: Path, events: int) -> int:
        start = datetime(2026, 11, 28, tzinfo=UTC)
        made = [
            UniversalFailureEvent(
                source=FailureSource.AIRFLOW, pipeline_id="d", unit_id=f"t{i}",
                error_type="OperationalError", error_message="Connection refused",
                created_utc=start + timedelta(seconds=i),
            )
            for i in range(events)
        ]  # fmt: skip
        with Memory.open(home) as memory:
            incident, _ = memory.open_or_attach(made[0], "fp", "key")
            memory.attach_events(incident.id, [(e, "fp") for e in made[1:]], "key")
            found: list[Any] = []
            steps = vm_steps(memory.db.conn, lambda: found.append(memory.latest_event(incident.id)))
            assert found[0].unit_id == f"t{events - 1}"
            return steps

    assert cost(tmp_path / "large", 3000) < 2 * cost(tmp_path / "small", 300) + 10


def test_claims_grow_while_batches_are_fast_and_fall_back_when_one_heals() -> None:
    next_claim, most = patchit.worker.worker.next_claim, 50 * patchit.worker.worker.GROW_UP_TO
    assert next_claim(50, 50, elapsed_s=0.2, rows=50) == 100
    assert next_claim(800, 50, elapsed_s=1.0, rows=800) == most
    assert next_claim(most, 50, elapsed_s=1.0, rows=1000) == most
    assert next_claim(400, 50, elapsed_s=30.0, rows=400) == 50  # a heal ran: back to 50
    assert next_claim(50, 50, elapsed_s=0.0, rows=0) == 50  # nothing was claimed

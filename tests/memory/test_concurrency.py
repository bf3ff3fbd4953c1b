"""Several worker processes sharing one attempt memory: one incident per cause, one healer.

Workers are forked before any connection is open in the parent, each opens its own.
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.synchronize import Barrier
from pathlib import Path

from patchit.events.model import UniversalFailureEvent
from patchit.memory import MIGRATIONS, Memory

WORKERS = 6


def attach_worker(home: str, unit: str, barrier: Barrier, out: mp.Queue) -> None:
    mem = Memory.open(Path(home))
    ev = UniversalFailureEvent.model_validate(
        {
            "source": "dbt",
            "pipeline_id": "shop",
            "unit_id": f"model.shop.{unit}",
            "error_type": "Binder Error",
            "error_message": 'Referenced column "order_dt" not found',
            "repo_path": "/srv/shop",
        }
    )
    barrier.wait()
    incident, created = mem.open_or_attach(ev, f"fp-{unit}", "one-cause")
    claimed = mem.claim_incident(incident.id, f"worker-{unit}", ttl_s=60)
    out.put((incident.id, created, claimed))
    mem.close()


def test_racing_workers_open_one_incident_and_one_of_them_heals_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Memory.open(home).close()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=attach_worker, args=(str(home), f"node{i}", barrier, out))
        for i in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0

    ids = {incident_id for incident_id, _, _ in results}
    assert len(ids) == 1
    assert sum(created for _, created, _ in results) == 1
    assert sum(claimed for _, _, claimed in results) == 1
    with Memory.open(home) as mem:
        (incident,) = mem.list_incidents()
        assert incident.events == WORKERS
        assert {e.unit_id for e in mem.events_for(incident.id)} == {
            f"model.shop.node{i}" for i in range(WORKERS)
        }


def test_racing_workers_on_a_fresh_file_migrate_it_once(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=attach_worker, args=(str(home), f"n{i}", barrier, out))
        for i in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    assert len({incident_id for incident_id, _, _ in results}) == 1
    with Memory.open(home) as mem:
        applied = [r["id"] for r in mem.db.query("select id from _migrations")]
        assert applied == list(range(1, len(MIGRATIONS) + 1))  # each applied exactly once

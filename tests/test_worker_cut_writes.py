"""A memory write cut off on a Postgres state (a retryable MemoryStoreError) is healed again
`CUT_WRITE_RETRIES` times in a row at most, counted afresh after any success (a batch, or a
resumed incident); SQLite's errors are never retryable (fast: the cuts are simulated)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from patchit.errors import MemoryStoreError
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.worker.worker import CUT_WRITE_RETRIES, Worker, _Batch
from tests.test_worker import airflow_event, spool


def _cut() -> MemoryStoreError:
    error = MemoryStoreError("attempt memory could not write (connection lost); run it again")
    error.retryable = True
    return error


def _heals(monkeypatch: pytest.MonkeyPatch, outcomes: list[bool]) -> list[bool]:
    """Worker._heal_rows cut (False) or done (True) in turn; what is left of `outcomes`."""

    def heal(
        self: Worker, rows: Any, memory: Memory, where: str = "spool row", spool: Any = None
    ) -> _Batch:
        if rows and not outcomes.pop(0):
            raise _cut()
        return _Batch()

    monkeypatch.setattr(Worker, "_heal_rows", heal)
    return outcomes


def _one_event(home: Path) -> None:
    spool(home, [airflow_event("dag", "task", "ValueError", "boom")])


def test_a_cut_past_the_retries_in_a_row_ends_the_worker(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_event(_patchit_home)
    left = _heals(monkeypatch, [False] * (CUT_WRITE_RETRIES + 1) + [True])
    with pytest.raises(MemoryStoreError):
        Worker(_patchit_home, say=lambda _line: None).run(once=True)
    assert left == [True]  # the 4th cut in a row ended it
    with Spool.open(_patchit_home) as s:
        assert s.counts() == {"pending": 1}  # given back, not lost


def test_the_cuts_are_counted_in_a_row_only(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_event(_patchit_home)
    cuts = [False] * CUT_WRITE_RETRIES
    _heals(monkeypatch, [*cuts, True])
    worker = Worker(_patchit_home, say=lambda _line: None)
    assert worker.run(once=True).processed == 1
    _one_event(_patchit_home)
    _heals(monkeypatch, [*cuts, True])  # as many again after a success: still retried
    assert worker.run(once=True).processed == 2


def test_a_resumed_incident_counts_the_cuts_afresh(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resumes = [False] * CUT_WRITE_RETRIES + [True]

    def resume(self: Worker, incident: Any, memory: Memory) -> None:
        if not resumes.pop(0):
            raise _cut()

    monkeypatch.setattr(Worker, "_resume", resume)
    monkeypatch.setattr(Memory, "abandoned_incidents", lambda self: [SimpleNamespace(id="i-1")])
    _one_event(_patchit_home)
    _heals(monkeypatch, [False, True])  # a batch cut once after the resume's 3 cuts
    assert Worker(_patchit_home, say=lambda _line: None).run(once=True).processed == 1
    assert resumes == []


def test_the_heal_dag_s_events_are_healed_again_after_a_cut(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `patchit_heal` task (`heal_payloads`) keeps its events in the run's conf: a cut
    write heals them again in the task, as many times in a row as a spooled batch."""
    payload = json.dumps(airflow_event("dag", "task", "ValueError", "boom"))
    left = _heals(monkeypatch, [False] * CUT_WRITE_RETRIES + [True])
    said: list[str] = []
    worker = Worker(_patchit_home, say=said.append)
    assert worker.heal_payloads([payload]) == {}
    assert left == []
    assert sum("healing the 1 event(s) again" in line for line in said) == CUT_WRITE_RETRIES
    _heals(monkeypatch, [False] * (CUT_WRITE_RETRIES + 1))
    with pytest.raises(MemoryStoreError):  # past the retries: the task fails, Airflow retries
        worker.heal_payloads([payload])


def test_sqlite_memory_errors_are_never_retryable(_patchit_home: Path) -> None:
    with Memory.open(_patchit_home) as memory:
        store: Any = memory
        for exc in (
            sqlite3.OperationalError("database is locked"),
            sqlite3.OperationalError("disk I/O error"),
            sqlite3.IntegrityError("UNIQUE constraint failed"),
            sqlite3.DatabaseError("database disk image is malformed"),
        ):
            assert store._error("write", exc).retryable is False, exc
    # and a real one: the memory locked past its busy timeout
    path = _patchit_home / "memory" / "attempts.sqlite3"
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        memory = Memory.open(_patchit_home, busy_timeout_s=0.1)
        with memory, pytest.raises(MemoryStoreError) as info:
            memory.claim_incident("inc-1", "me", ttl_s=60)
        assert info.value.retryable is False
    finally:
        holder.execute("ROLLBACK")
        holder.close()

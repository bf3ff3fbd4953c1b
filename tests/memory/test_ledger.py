"""The LLM ledger in the memory database: migration, usage totals, rounds, the breaker streak."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlite_utils import Database

from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory
from patchit.memory.ledger import CallOutcome, Ledger, LlmPurpose
from patchit.memory.migrations import MIGRATIONS, m001_initial
from patchit.patching.base import Edit, PatchCandidate


def event(unit: str) -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {"source": "dbt", "pipeline_id": "shop", "unit_id": f"model.shop.{unit}"}
    )


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path / "home")
    yield mem
    mem.close()


def incident(memory: Memory, name: str, status: str = "open") -> str:
    found = memory.create_incident(event(name), f"fp-{name}", f"cause-{name}")
    if status != "open":
        memory.transition(found.id, status)
    return found.id


def test_a_store_from_before_the_ledger_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "home" / "memory" / "attempts.sqlite3"
    path.parent.mkdir(parents=True)
    db = Database(sqlite3.connect(str(path)))
    m001_initial(db)
    db.table("_migrations").insert({"id": 1, "name": "m001_initial", "applied_utc": "x"}, pk="id")
    db.close()
    with Memory.open(tmp_path / "home") as mem:
        assert "llm_calls" in mem.db.table_names()
        applied = [r["name"] for r in mem.db.query("select name from _migrations order by id")]
        assert applied == [m.__name__ for m in MIGRATIONS]
        assert Ledger(mem).incident_totals("any").calls == 0


def test_record_and_read_back(memory: Memory) -> None:
    ledger = Ledger(memory)
    one = incident(memory, "a")
    ledger.record(one, "propose", 1, "claude-x", tokens_in=100, tokens_out=20, cost_usd=0.5)
    ledger.record(one, LlmPurpose.CLASSIFY, 0, "claude-x", outcome="error", error="401")
    ledger.record(one, "propose", 2, "claude-x", tokens_in=7, outcome=CallOutcome.MALFORMED)
    calls = ledger.calls_for(one)
    assert [(c.purpose, c.round, c.outcome) for c in calls] == [
        ("propose", 1, "ok"),
        ("classify", 0, "error"),
        ("propose", 2, "malformed"),
    ]
    assert calls[1].error == "401" and calls[0].created_utc.tzinfo is not None
    totals = ledger.incident_totals(one)
    assert (totals.calls, totals.tokens, totals.cost_usd) == (3, 127, 0.5)
    assert ledger.rounds_used(one) == {1, 2}
    assert ledger.calls_for("other") == [] and ledger.rounds_used("other") == set()
    with pytest.raises(ValueError):
        ledger.record(one, "summarise", 1, "claude-x")


def test_day_totals_are_per_utc_day_over_all_incidents(memory: Memory) -> None:
    ledger = Ledger(memory)
    one, two = incident(memory, "a"), incident(memory, "b")
    day = datetime(2026, 3, 10, tzinfo=UTC)
    ledger.record(one, "propose", 1, "m", tokens_in=10, now=day + timedelta(hours=23, minutes=59))
    ledger.record(two, "propose", 1, "m", tokens_in=5, cost_usd=0.1, now=day)
    ledger.record(two, "propose", 1, "m", tokens_in=1000, now=day + timedelta(days=1))
    # a local time that is still 10 March in UTC counts for 10 March
    local = datetime(2026, 3, 10, 20, 30, tzinfo=UTC).astimezone(timezone(timedelta(hours=-5)))
    ledger.record(one, "classify", 0, "m", tokens_out=1, now=local)
    totals = ledger.day_totals(day.date())
    assert (totals.calls, totals.tokens, totals.cost_usd) == (3, 16, 0.1)
    assert ledger.day_totals(day.date() + timedelta(days=1)).tokens == 1000
    assert ledger.day_totals().tokens == 0  # today


def test_failed_streak(memory: Memory) -> None:
    ledger = Ledger(memory)
    start = datetime.now(UTC) - timedelta(days=1)
    current = incident(memory, "now")
    order = ["failed", "fixed", "failed", "escalated", "failed", "open"]
    for n, status in enumerate(order):
        ledger.record(
            incident(memory, f"i{n}", status), "propose", 1, "m", now=start + timedelta(hours=n)
        )
    incident(memory, "no-llm", "failed")  # never used the model: not part of the streak
    ledger.record(current, "propose", 1, "m")
    # newest first: open (passed over), failed, escalated (passed over), failed, fixed (stop)
    assert ledger.failed_streak(exclude=current) == 2
    assert ledger.failed_streak() == 2  # the current one is open: passed over as well
    memory.transition(current, "failed")
    assert ledger.failed_streak() == 3


def test_history_carries_the_verification_output(memory: Memory) -> None:
    one = incident(memory, "a")
    candidate = PatchCandidate(
        strategy="llm",
        tag="other",
        tier=1,
        edits=[Edit(path="m.sql", search="a", replace="b")],
        rationale="r",
    )
    memory.record_attempt(
        one, "fp-a", candidate, "-a\n+b\n", "failed", "still failing", "$ dbt build\nboom"
    )
    [prior] = memory.history("fp-a")
    assert (prior.reason, prior.output) == ("still failing", "$ dbt build\nboom")

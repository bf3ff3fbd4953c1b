"""Budgets and loop guards refuse a call before it is made (the server receives nothing)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from patchit.evidence.model import Evidence
from patchit.memory import Memory
from patchit.memory.ledger import Ledger
from patchit.patching.llm.answers import propose_tool
from patchit.patching.llm.budget import (
    TOOL_OVERHEAD_TOKENS,
    BudgetExhausted,
    estimate_input_tokens,
    estimate_tokens,
)
from patchit.patching.llm.client import LlmRequest, LlmUnavailable
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from tests.llm.conftest import answer, cand, llm_config, make_event

GOOD = answer(cand("c.nme", "c.name"), usage=(1500, 100))


def attempt(
    evidence: Evidence, memory: Memory, incident_id: str, round_no: int = 1, **cfg: Any
) -> tuple[Any, ReplayServer]:
    with ReplayServer([GOOD]) as server:
        strategy = LlmStrategy(llm_config(server, **cfg), memory, incident_id)
        try:
            return strategy.propose_round(evidence, [], round_no), server
        except BudgetExhausted as exc:
            return exc, server


def other_incident(memory: Memory, repo: Path, status: str, name: str) -> str:
    incident = memory.create_incident(make_event(repo, unit_id=f"model.shop.{name}"), name, name)
    memory.transition(incident.id, status)
    return incident.id


def test_estimate_rule() -> None:
    assert estimate_tokens("x" * 7) == 2 and estimate_tokens("x" * 8) == 3
    request = LlmRequest("s" * 35, "u" * 70, propose_tool(2), 1000)
    schema_chars = len(__import__("json").dumps(request.tool.as_param()))
    expected = 10 + 20 + math.ceil(schema_chars / 3.5) + TOOL_OVERHEAD_TOKENS
    assert estimate_input_tokens(request) == expected


def test_per_incident_cost_refused_before_the_call(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    # max_tokens alone (4096 output tokens at $15/Mtok = $0.061) is above the limit
    result, server = attempt(evidence, memory, incident_id, max_cost_per_incident_usd=0.05)
    assert isinstance(result, BudgetExhausted)
    assert str(result).startswith("llm.max_cost_per_incident_usd ($0.05): $0.0000 used")
    assert server.requests == [] and Ledger(memory).calls_for(incident_id) == []


def test_per_incident_tokens_count_what_was_spent(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    Ledger(memory).record(incident_id, "propose", 1, "m", tokens_in=193_000, tokens_out=4_000)
    result, server = attempt(evidence, memory, incident_id, round_no=2)
    assert isinstance(result, BudgetExhausted) and server.requests == []
    assert "llm.max_tokens_per_incident (200000): 197000 used" in str(result)


def test_per_day_tokens_count_every_incident_of_the_utc_day(
    evidence: Evidence, memory: Memory, incident_id: str, repo: Path
) -> None:
    ledger = Ledger(memory)
    other = other_incident(memory, repo, "fixed", "orders")
    yesterday = datetime.now(UTC) - timedelta(days=1)
    ledger.record(other, "propose", 1, "m", tokens_in=90_000, now=yesterday)
    result, server = attempt(evidence, memory, incident_id, max_tokens_per_day=100_000)
    assert not isinstance(result, BudgetExhausted) and len(server.requests) == 1
    ledger.record(other, "propose", 1, "m", tokens_in=94_000)
    result, server = attempt(evidence, memory, incident_id, max_tokens_per_day=100_000)
    assert isinstance(result, BudgetExhausted) and server.requests == []
    assert str(result).startswith("llm.max_tokens_per_day (100000): 95600 used today (UTC)")


def test_per_day_cost(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    Ledger(memory).record(incident_id, "classify", 0, "m", cost_usd=0.99)
    result, server = attempt(evidence, memory, incident_id, max_cost_per_day_usd=1.0)
    assert isinstance(result, BudgetExhausted) and server.requests == []
    assert "llm.max_cost_per_day_usd ($1): $0.9900 used today" in str(result)


def test_max_rounds(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    result, server = attempt(evidence, memory, incident_id, round_no=2, max_rounds=1)
    assert isinstance(result, BudgetExhausted) and server.requests == []
    assert "llm.max_rounds: 1 LLM round(s) per incident already used" in str(result)
    # a new run of the loop numbering from 1 again cannot get round 3 past the ledger
    Ledger(memory).record(incident_id, "propose", 1, "m")
    Ledger(memory).record(incident_id, "propose", 2, "m")
    result, server = attempt(evidence, memory, incident_id, round_no=3, max_rounds=3)
    assert not isinstance(result, BudgetExhausted)
    result, server = attempt(evidence, memory, incident_id, round_no=4, max_rounds=3)
    assert isinstance(result, BudgetExhausted) and server.requests == []


def test_circuit_breaker_after_consecutive_failed_incidents(
    evidence: Evidence, memory: Memory, incident_id: str, repo: Path
) -> None:
    ledger = Ledger(memory)
    start = datetime.now(UTC) - timedelta(hours=3)
    for n, status in enumerate(["fixed", "failed", "escalated", "failed"]):
        other = other_incident(memory, repo, status, f"m{n}")
        ledger.record(other, "propose", 1, "m", now=start + timedelta(minutes=n))
    result, server = attempt(evidence, memory, incident_id, breaker_after_failed_incidents=2)
    assert isinstance(result, BudgetExhausted) and server.requests == []
    assert "circuit breaker open, the last 2 incidents that used the LLM all failed" in str(result)
    result, server = attempt(evidence, memory, incident_id, breaker_after_failed_incidents=3)
    assert not isinstance(result, BudgetExhausted) and len(server.requests) == 1


def test_every_call_is_in_the_ledger_with_its_real_usage(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    attempt(evidence, memory, incident_id)
    with ReplayServer([{"error": {"status": 401}}]) as server:
        strategy = LlmStrategy(llm_config(server), memory, incident_id)
        with pytest.raises(LlmUnavailable):
            strategy.propose_round(evidence, [], 2)
    ok, error = Ledger(memory).calls_for(incident_id)
    assert (ok.outcome, ok.tokens_in, ok.tokens_out) == ("ok", 1500, 100)
    assert ok.cost_usd == pytest.approx((1500 * 3 + 100 * 15) / 1e6)
    assert ok.model == "claude-sonnet-5" and ok.round == 1
    assert (error.outcome, error.tokens_in, error.round) == ("error", 0, 2)
    assert "401" in error.error

"""The classification second opinion: only for `unknown`, quotes checked against the evidence."""

from __future__ import annotations

from typing import Any

import pytest

from patchit.classify.model import FailureClass, Verdict
from patchit.evidence.model import Evidence
from patchit.memory import Memory
from patchit.memory.ledger import Ledger
from patchit.patching.llm.budget import BudgetExhausted
from patchit.patching.llm.second_opinion import SIGNATURE, second_opinion, verified_quotes
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from tests.llm.conftest import llm_config

UNKNOWN = Verdict(
    cls=FailureClass.UNKNOWN,
    signature="none",
    reason="no known signature matches the error of customers.",
    next_actions=["dbt build --select customers"],
)


def opinion(cls: str, *quotes: str) -> dict[str, Any]:
    return {
        "tool_use": {
            "input": {"class": cls, "reason": "The column was renamed.", "evidence_quotes": quotes}
        },
        "usage": {"input_tokens": 800, "output_tokens": 60},
    }


def ask(
    steps: list[Any], evidence: Evidence, verdict: Verdict, memory: Memory, incident_id: str
) -> tuple[Verdict, ReplayServer]:
    with ReplayServer(steps) as server:
        result = second_opinion(evidence, verdict, llm_config(server), memory, incident_id)
    return result, server


def test_unknown_gets_the_models_class_with_verified_quotes(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    step = opinion(
        "code_bug",
        'Referenced column "nme"  not found',  # whitespace differs: still found
        "the warehouse was down at 03:00",  # made up: dropped
    )
    verdict, server = ask([step], evidence, UNKNOWN, memory, incident_id)
    assert verdict.cls is FailureClass.CODE_BUG and verdict.signature == SIGNATURE
    assert 'Evidence quoted: "Referenced column "nme" not found"' in verdict.reason
    assert "warehouse was down" not in verdict.reason
    assert verdict.next_actions == UNKNOWN.next_actions
    body = server.bodies[0]
    assert body["tool_choice"] == {"type": "tool", "name": "classify_failure"}
    assert body["max_tokens"] == 1024
    [call] = Ledger(memory).calls_for(incident_id)
    assert (call.purpose, call.round, call.tokens_in) == ("classify", 0, 800)


@pytest.mark.parametrize(
    "cls", [FailureClass.INFRA_ISSUE, FailureClass.DATA_ISSUE, FailureClass.CODE_BUG]
)
def test_a_matched_class_is_final_and_costs_no_call(
    evidence: Evidence, memory: Memory, incident_id: str, cls: FailureClass
) -> None:
    matched = Verdict(cls=cls, signature="some_signature", reason="matched")
    verdict, server = ask([opinion("code_bug", "nme")], evidence, matched, memory, incident_id)
    assert verdict == matched
    assert server.requests == [] and Ledger(memory).calls_for(incident_id) == []


def test_a_class_without_a_real_quote_is_not_used(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    step = opinion("infra_issue", "connection refused by the warehouse")
    verdict, _ = ask([step], evidence, UNKNOWN, memory, incident_id)
    assert verdict.cls is FailureClass.UNKNOWN and verdict.signature == "none"
    assert "said infra_issue but quoted nothing found in the evidence" in verdict.reason


def test_malformed_answer_leaves_unknown_with_a_note(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    bad = {"tool_use": {"input": {"class": "cosmic_rays", "reason": "x"}}}
    verdict, _ = ask([bad], evidence, UNKNOWN, memory, incident_id)
    assert verdict.cls is FailureClass.UNKNOWN
    assert "second opinion was unusable: malformed classify_failure answer (class" in verdict.reason
    assert Ledger(memory).calls_for(incident_id)[0].outcome == "malformed"


def test_switched_off_or_over_budget(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    with ReplayServer([]) as server:
        off = llm_config(server, second_opinion=False)
        assert second_opinion(evidence, UNKNOWN, off, memory, incident_id) == UNKNOWN
        poor = llm_config(server, max_cost_per_incident_usd=0.0)
        with pytest.raises(BudgetExhausted, match="max_cost_per_incident_usd"):
            second_opinion(evidence, UNKNOWN, poor, memory, incident_id)
    assert server.requests == []


def test_through_the_strategy_session(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    with ReplayServer([opinion("env_mismatch", "Binder Error")]) as server:
        strategy = LlmStrategy(llm_config(server), memory, incident_id)
        verdict = strategy.second_opinion(evidence, UNKNOWN)
    assert verdict.cls is FailureClass.ENV_MISMATCH and '"Binder Error"' in verdict.reason


def test_verified_quotes() -> None:
    shown = "error:\nBinder Error: Referenced   column"
    assert verified_quotes(["Binder Error: Referenced column", "abc", "nope nope"], shown) == [
        "Binder Error: Referenced column"
    ]

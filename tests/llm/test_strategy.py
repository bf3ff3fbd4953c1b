"""LlmStrategy against the replay server: candidates, edit checks, malformed answers, usage."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from patchit.config import PatchitConfig
from patchit.evidence.model import Evidence
from patchit.memory import Memory
from patchit.memory.ledger import Ledger
from patchit.patching.apply import apply_edits
from patchit.patching.base import ProposalRequest
from patchit.patching.llm.edits import tolerant_pattern
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from tests.llm.conftest import MODEL_PATH, MODEL_SQL, answer, cand, llm_config


def run_round(
    steps: list[Any], evidence: Evidence, memory: Memory, incident_id: str, **cfg: Any
) -> Any:
    with ReplayServer(steps) as server:
        strategy = LlmStrategy(llm_config(server, **cfg), memory, incident_id)
        try:
            result = strategy.propose_round(evidence, [], 1)
        finally:
            strategy.close()
    return result, server


def test_tool_use_answer_becomes_tier_1_candidates(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    step = answer(
        cand("    c.nme,\n", "    c.name,\n", confidence=1.7),
        cand("c.nme", "c.name as nme", tag="Something Else", confidence=0.2),
        usage=(2000, 300),
    )
    result, server = run_round([step], evidence, memory, incident_id)
    assert result.problem == "" and result.rejected == []
    first, second = result.candidates
    assert (first.strategy, first.tier, first.tag) == ("llm", 1, "rename_column")
    assert second.tag == "other"  # outside the vocabulary
    assert (first.confidence, second.confidence) == (1.0, 0.2)
    assert first.edits[0].path == MODEL_PATH and first.edits[0].replace == "    c.name,\n"
    assert (first.tokens_in, first.tokens_out) == (2000, 300)
    assert first.cost_usd == pytest.approx((2000 * 3 + 300 * 15) / 1e6)
    assert (second.tokens_in, second.tokens_out, second.cost_usd) == (0, 0, 0.0)
    assert (result.tokens_in, result.tokens_out) == (2000, 300)
    tool = server.bodies[0]["tools"][0]["input_schema"]["properties"]["candidates"]
    assert tool["maxItems"] == 2  # candidates_per_round, asked in one call
    [call] = Ledger(memory).calls_for(incident_id)
    assert (call.purpose, call.round, call.outcome, call.tokens_in) == ("propose", 1, "ok", 2000)


def test_whitespace_tolerant_retry_rewrites_search_to_the_file_text(
    evidence: Evidence, memory: Memory, incident_id: str, tmp_path: Path
) -> None:
    sloppy = "  c.customer_id,\n\tc.nme,  \n  o.total"  # indentation, a tab, trailing spaces
    result, _ = run_round(
        [answer(cand(sloppy, "    c.customer_id,\n    c.name,\n    o.total"))],
        evidence,
        memory,
        incident_id,
    )
    [candidate] = result.candidates
    assert candidate.edits[0].search == "    c.customer_id,\n    c.nme,\n    o.total"
    assert "ignoring whitespace" in result.note
    copy = tmp_path / "copy"
    shutil.copytree(evidence.repo_root, copy)
    apply_edits(copy, candidate.edits)
    assert "    c.name,\n" in (copy / MODEL_PATH).read_text()


def test_edits_that_do_not_match_are_rejected_with_the_reason(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    step = answer(
        cand("c.nmae,", "c.name,"),  # not in the file, even ignoring whitespace
        cand("customer_id", "id"),  # four times
        cand("c.nme", "c.name", file="../outside.sql"),
        cand("c.nme", "c.name", file="models/missing.sql"),
        cand("c.nme", "c.nme"),
    )
    result, _ = run_round([step], evidence, memory, incident_id, candidates_per_round=5)
    assert result.candidates == []
    reasons = [reason for _, reason in result.rejected]
    assert "search text not found, even ignoring whitespace" in reasons[0]
    assert "found 4 times, it must be unique" in reasons[1]
    assert "leaves the repository" in reasons[2]
    assert "does not exist" in reasons[3]
    assert "changes nothing" in reasons[4]
    # the call's usage stays on the first candidate, so the refused attempt carries it
    assert result.rejected[0][0].tokens_in == 1000 and result.rejected[1][0].tokens_in == 0
    assert Path(evidence.repo_root, MODEL_PATH).read_text() == MODEL_SQL


def test_malformed_tool_answer_yields_no_candidates_and_is_in_the_ledger(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    bad = {
        "tool_use": {"input": {"candidates": [{"edits": "not a list", "strategy_tag": "x"}]}},
        "usage": {"input_tokens": 900, "output_tokens": 40},
    }
    result, _ = run_round([bad], evidence, memory, incident_id)
    assert result.candidates == [] and result.rejected == []
    assert "malformed propose_patches answer (candidates.0.edits" in result.problem
    assert result.note.startswith("malformed")
    assert (result.tokens_in, result.tokens_out) == (900, 40)
    [call] = Ledger(memory).calls_for(incident_id)
    assert (call.outcome, call.tokens_in, call.tokens_out) == ("malformed", 900, 40)
    assert "candidates.0.edits" in call.error


def test_a_text_answer_is_malformed(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    result, _ = run_round([{"text": "Try renaming it."}], evidence, memory, incident_id)
    assert result.candidates == []
    assert "did not call the propose_patches tool: 'Try renaming it.'" in result.problem


def test_an_empty_answer_and_too_many_candidates(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    result, _ = run_round([answer()], evidence, memory, incident_id)
    assert result.candidates == [] and result.problem == "the model proposed no patch"
    many = answer(*(cand("c.nme", f"c.name as n{i}") for i in range(3)))
    result, _ = run_round([many], evidence, memory, incident_id, candidates_per_round=2)
    assert len(result.candidates) == 2 and "kept the first 2" in result.note


def test_an_edit_can_create_a_file(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    step = answer(cand("", "select 1 as id\n", file="models/new_model.sql", tag="create_dir"))
    result, _ = run_round([step], evidence, memory, incident_id)
    [candidate] = result.candidates
    assert candidate.edits[0].search == "" and candidate.tag == "create_dir"


def test_later_edits_see_the_earlier_ones(
    evidence: Evidence, memory: Memory, incident_id: str
) -> None:
    two = cand("c.nme", "c.name")
    two["edits"].append({"file": MODEL_PATH, "search": "c.name,", "replace": "c.name as nme,"})
    result, _ = run_round([answer(two)], evidence, memory, incident_id)
    [candidate] = result.candidates
    assert [e.search for e in candidate.edits] == ["c.nme", "c.name,"]


def test_propose_is_round_one(evidence: Evidence, memory: Memory, incident_id: str) -> None:
    with ReplayServer([answer(cand("c.nme", "c.name"))]) as server:
        strategy = LlmStrategy(llm_config(server), Ledger(memory), incident_id)
        proposal = strategy.propose(ProposalRequest(evidence=evidence))
    [candidate] = proposal.candidates
    assert candidate.edits[0].replace == "c.name"
    assert (proposal.pick, proposal.more) == ("smallest", True)
    assert Ledger(memory).rounds_used(incident_id) == {1}


def test_the_entry_point_form_takes_its_incident_config_and_budget_from_the_request(
    evidence: Evidence, memory: Memory, incident_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    steps = [answer(cand("c.nme", "c.bad")), answer(cand("c.nme", "c.name"))]
    with ReplayServer(steps) as server:
        config = PatchitConfig.model_validate(
            {"llm": {"base_url": server.base_url, "max_retries": 0, "max_rounds": 2}}
        )
        strategy = LlmStrategy()
        asked = [
            strategy.propose(
                ProposalRequest(
                    evidence=evidence,
                    round=n,
                    incident_id=incident_id,
                    config=config,
                    ledger=Ledger(memory),
                )
            )
            for n in (1, 2, 3)
        ]
        strategy.close()
    assert [p.candidates[0].edits[0].replace for p in asked[:2]] == ["c.bad", "c.name"]
    assert [p.more for p in asked] == [True, False, False]
    assert asked[2].candidates == [] and len(server.requests) == 2  # past max_rounds: no call
    assert Ledger(memory).rounds_used(incident_id) == {1, 2}
    assert asked[0].status == f"tier 1 (LLM, {config.llm.model})"


def test_without_a_key_the_entry_point_form_is_off_and_calls_nothing(
    evidence: Evidence, memory: Memory, incident_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    request = ProposalRequest(evidence=evidence, incident_id=incident_id, ledger=Ledger(memory))
    proposal = LlmStrategy().propose(request)
    assert (
        proposal.candidates == [] and proposal.status == "tier 1 (LLM): off (no ANTHROPIC_API_KEY)"
    )
    assert Ledger(memory).calls_for(incident_id) == []


def test_tolerant_pattern_ignores_space_runs_and_line_ends() -> None:
    pattern = tolerant_pattern("a  b\n  c ")
    assert pattern.fullmatch("a\tb   \r\n\tc")
    assert not pattern.fullmatch("ab\nc")  # whitespace between tokens is still required
    # a final newline does not swallow the next line's indentation; no indent: mid-line start
    found = tolerant_pattern("b, \n").search("a\n    b,\n    c\n")
    assert found is not None and found.group(0) == "b,\n"
    found = tolerant_pattern("  b,\n\n  c").search("a\n    b,\n   \n    c\n")
    assert found is not None and found.group(0) == "    b,\n   \n    c"

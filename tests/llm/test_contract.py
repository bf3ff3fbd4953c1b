"""LlmStrategy meets the shared strategy contract, with a replay server standing in for the
model: it answers a fix for the failure it recognises in the prompt and nothing otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.evidence.model import Evidence
from patchit.memory import Memory
from patchit.patching.base import Strategy
from patchit.patching.llm.answers import TAGS
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from tests.llm.conftest import MODEL_PATH, answer, cand, llm_config, make_evidence, user_text
from tests.patching.contract import StrategyContract, ask


def model(body: dict[str, Any]) -> dict[str, Any]:
    """A deterministic "model": fixes the nme typo it sees in the prompt, else proposes nothing."""
    if 'Referenced column "nme" not found' in user_text(body):
        return answer(cand("    c.nme,\n", "    c.name,\n"), cand("c.nme", "c.name AS nme"))
    return answer()


class TestLlmStrategyContract(StrategyContract):
    @pytest.fixture
    def strategy(self, memory: Memory, incident_id: str) -> Iterator[Strategy]:
        with ReplayServer([], responder=model) as server:
            strategy = LlmStrategy(llm_config(server, max_rounds=1), memory, incident_id)
            yield strategy
            strategy.close()

    @pytest.fixture
    def unrelated_evidence(self, repo: Path) -> Evidence:
        return make_evidence(
            repo,
            error="Runtime Error: Could not connect to the database: connection refused",
            breaking_diff="",
        )

    # tier 1 and per-candidate tags are what set the LLM strategy apart from the rules
    def test_satisfies_the_strategy_protocol(self, strategy: Strategy) -> None:
        assert isinstance(strategy, Strategy)
        assert strategy.tier == 1
        assert (strategy.name, strategy.tag) == ("llm", "llm")

    def test_candidates_are_well_formed(self, strategy: Strategy, evidence: Evidence) -> None:
        candidates = ask(strategy, evidence)
        assert len(candidates) == 2
        root = Path(evidence.repo_root)
        for candidate in candidates:
            assert (candidate.strategy, candidate.tier) == ("llm", 1)
            assert candidate.tag in TAGS
            assert candidate.edits and candidate.rationale
            for edit in candidate.edits:
                assert edit.path == MODEL_PATH
                assert (root / edit.path).read_text().count(edit.search) == 1
                assert edit.search != edit.replace

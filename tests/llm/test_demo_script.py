"""The replay script shipped for `patchit demo --llm-replay` fits the demo's breaking change."""

from __future__ import annotations

import shutil
from pathlib import Path

from patchit.evidence.model import Evidence
from patchit.memory import Memory
from patchit.patching.apply import apply_edits
from patchit.patching.llm.server import ReplayServer
from patchit.patching.llm.strategy import LlmStrategy
from tests.conftest import EXAMPLE
from tests.llm.conftest import llm_config, make_evidence

SCRIPT = Path(__file__).resolve().parents[2] / "patchit/patching/llm/replays/demo.json"
MODEL = "models/marts/customers.sql"
GOOD = "        sum(amount) as lifetime_value\n"
BROKEN = "        sum(amount) as lifetime_value,\n        status as last_status\n"


def test_demo_answer_applies_to_the_broken_example(
    tmp_path: Path, memory: Memory, incident_id: str
) -> None:
    repo = tmp_path / "shop"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    good = (repo / MODEL).read_text()
    assert GOOD in good
    (repo / MODEL).write_text(good.replace(GOOD, BROKEN))
    evidence: Evidence = make_evidence(repo, unit_path=MODEL, raw_code=(repo / MODEL).read_text())
    with ReplayServer.from_file(SCRIPT) as server:
        strategy = LlmStrategy(llm_config(server), memory, incident_id)
        result = strategy.propose_round(evidence, [], 1)
    assert result.rejected == [] and len(result.candidates) == 2
    aggregate, revert = result.candidates
    assert "ignoring whitespace" in result.note  # the revert's search has trailing spaces
    for candidate, expected in (
        (
            aggregate,
            good.replace(GOOD, BROKEN.replace("status as", "arg_max(status, order_date) as")),
        ),
        (revert, good),
    ):
        copy = tmp_path / candidate.rationale[:10].replace(" ", "_")
        shutil.copytree(repo, copy)
        apply_edits(copy, candidate.edits)
        assert (copy / MODEL).read_text() == expected
    assert (aggregate.tokens_in, aggregate.tokens_out) == (3480, 412)

"""The contract every strategy meets, tier 0 and the model alike, held as a shared suite (like
dbt-adapters' Base* tests).

Subclass `StrategyContract` and provide three fixtures: `strategy`, `evidence` (a real failure
the strategy fixes) and `unrelated_evidence` (a real failure it must leave alone). The
strategy is driven only through its protocol: `propose(ProposalRequest)` and `close()`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits, preview_edits
from patchit.patching.base import PatchCandidate, Proposal, ProposalRequest, Strategy


def ask(strategy: Strategy, evidence: Evidence) -> list[PatchCandidate]:
    """Round 1's candidates, with no history."""
    proposal = strategy.propose(ProposalRequest(evidence=evidence))
    assert isinstance(proposal, Proposal)
    return proposal.candidates


def _snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class StrategyContract:
    def test_satisfies_the_strategy_protocol(self, strategy: Strategy) -> None:
        assert isinstance(strategy, Strategy)
        assert strategy.tier >= 0 and isinstance(strategy.rank, int)
        assert strategy.name and strategy.tag

    def test_unrelated_failure_gives_no_candidate(
        self, strategy: Strategy, unrelated_evidence: Evidence
    ) -> None:
        assert ask(strategy, unrelated_evidence) == []

    def test_candidates_are_well_formed(self, strategy: Strategy, evidence: Evidence) -> None:
        candidates = ask(strategy, evidence)
        assert candidates, "the strategy proposed nothing for the failure it exists for"
        root = Path(evidence.repo_root)
        for candidate in candidates:
            assert (candidate.strategy, candidate.tier) == (strategy.name, strategy.tier)
            # the strategy's bucket, or a sub-bucket of it (`tag:detail`) for a search whose
            # candidates are distinct experiments (memory refuses a bucket that failed once)
            assert candidate.tag == strategy.tag or candidate.tag.startswith(f"{strategy.tag}:")
            assert candidate.edits and candidate.rationale
            for edit in candidate.edits:
                assert not Path(edit.path).is_absolute() and ".." not in Path(edit.path).parts
                text = (root / edit.path).read_text()
                assert text.count(edit.search) == 1, (edit.path, edit.search)
                assert edit.search != edit.replace

    def test_applying_a_candidate_changes_the_file(
        self, strategy: Strategy, evidence: Evidence, tmp_path: Path
    ) -> None:
        candidate = ask(strategy, evidence)[0]
        before = preview_edits(Path(evidence.repo_root), candidate.edits)
        assert all(old != new for old, new in before.values())
        copy = tmp_path / "copy"
        shutil.copytree(evidence.repo_root, copy, ignore=shutil.ignore_patterns("*.duckdb"))
        touched = apply_edits(copy, candidate.edits)
        assert touched == list(before)
        for rel in touched:
            assert (copy / rel).read_text() == before[rel][1]

    def test_proposing_is_deterministic(self, strategy: Strategy, evidence: Evidence) -> None:
        assert ask(strategy, evidence) == ask(strategy, evidence)

    def test_proposing_writes_no_file(self, strategy: Strategy, evidence: Evidence) -> None:
        root = Path(evidence.repo_root)
        before = _snapshot(root)
        ask(strategy, evidence)
        assert _snapshot(root) == before

    def test_close_is_idempotent(self, strategy: Strategy, evidence: Evidence) -> None:
        ask(strategy, evidence)
        strategy.close()
        strategy.close()

import pytest

from patchit.errors import PatchitWarning
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.patching.base import (
    PatchCandidate,
    PriorAttempt,
    Proposal,
    ProposalRequest,
    Strategy,
)
from patchit.patching.registry import load_strategies

BUILTIN_TAGS = {
    "duckdb_rename_column": "rename_column",
    "dbt_fix_ref": "fix_ref",
    "dbt_self_ref_cycle": "fix_ref",
    "dbt_fix_macro": "fix_macro",
    "dbt_fix_yaml": "fix_yaml",
    "dbt_fanout_join": "fanout_join",
}


def test_builtins_load_through_the_entry_point_group_sorted() -> None:
    strategies = load_strategies()
    assert all(isinstance(s, Strategy) for s in strategies)
    names = {s.name: s.tag for s in strategies}
    assert BUILTIN_TAGS.items() <= names.items()
    order = [(s.tier, s.rank, s.name) for s in strategies]
    assert order == sorted(order)


class _Old:
    """A strategy written against the old protocol: propose(evidence, history), no close."""

    name = "old"
    tag = "t"
    tier = 0

    def propose(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        return []


def test_the_model_tier_is_an_entry_point_like_the_fix_its() -> None:
    strategies = {s.name: s for s in load_strategies()}
    assert strategies["llm"].tier == 1 and isinstance(strategies["llm"], Strategy)
    assert max(s.tier for s in strategies.values()) == 1


def test_every_strategy_answers_a_request_with_a_proposal() -> None:
    event = UniversalFailureEvent(source=FailureSource.DBT, pipeline_id="p", unit_id="u")
    request = ProposalRequest(evidence=Evidence(event=event, repo_root="/nonexistent"))
    for strategy in load_strategies():
        proposal = strategy.propose(request)
        assert isinstance(proposal, Proposal) and proposal.candidates == [], strategy.name
        strategy.close()
        strategy.close()  # idempotent


def test_an_entry_point_that_is_not_a_strategy_is_skipped_with_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import patchit.plugins as registry

    real = registry.entry_points

    class _Point:
        name, value = "old_style", "tests.patching.test_registry:_Old"

        def load(self) -> type[_Old]:
            return _Old

    def fake_entry_points(group: str) -> list[object]:
        return [*real(group=group), _Point()]

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    with pytest.warns(PatchitWarning, match="'old_style' .* is not a Strategy"):
        strategies = load_strategies()
    assert "old" not in {s.name for s in strategies} and "llm" in {s.name for s in strategies}

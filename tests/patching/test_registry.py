import pytest

from patchit.errors import PatchitWarning
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.patching.base import Edit, PatchCandidate, PriorAttempt, Strategy
from patchit.patching.registry import load_strategies, propose_patches

BUILTIN_TAGS = {
    "duckdb_rename_column": "rename_column",
    "dbt_fix_ref": "fix_ref",
    "dbt_self_ref_cycle": "fix_ref",
    "dbt_fix_macro": "fix_macro",
    "dbt_fix_yaml": "fix_yaml",
}


def test_builtins_load_through_the_entry_point_group_sorted() -> None:
    strategies = load_strategies()
    assert all(isinstance(s, Strategy) for s in strategies)
    names = {s.name: s.tag for s in strategies}
    assert BUILTIN_TAGS.items() <= names.items()
    assert [(s.tier, s.name) for s in strategies] == sorted((s.tier, s.name) for s in strategies)


class _Fixed:
    name = "fixed"
    tag = "t"
    tier = 0

    def __init__(self, edits: list[list[str]]) -> None:
        self.edits = edits

    def propose(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                edits=[Edit(path=p, search=s, replace=r) for p, s, r in [e]],
                rationale="scripted",
            )
            for e in self.edits
        ]


class _Broken(_Fixed):
    name = "broken"

    def propose(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        raise ValueError("bug in a plugin")


def _evidence() -> Evidence:
    event = UniversalFailureEvent(source=FailureSource.DBT, pipeline_id="p", unit_id="u")
    return Evidence(event=event, repo_root="/nonexistent")


def test_propose_patches_is_lazy_in_order_and_drops_duplicates() -> None:
    first = _Fixed([["a.sql", "x", "y"], ["a.sql", "x", "z"]])
    second = _Fixed([["a.sql", "x", "y"], ["b.sql", "x", "y"]])
    found = propose_patches(_evidence(), [], [first, second])
    assert next(found).edits[0].replace == "y"
    rest = [(c.edits[0].path, c.edits[0].replace) for c in found]
    assert rest == [("a.sql", "z"), ("b.sql", "y")]


def test_a_strategy_that_raises_is_reported_and_skipped() -> None:
    with pytest.warns(PatchitWarning, match="broken failed"):
        found = list(propose_patches(_evidence(), [], [_Broken([]), _Fixed([["a", "b", "c"]])]))
    assert len(found) == 1

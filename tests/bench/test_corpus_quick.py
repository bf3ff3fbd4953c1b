"""The CI subset of the corpus, its dbt part: one scenario per expected verdict (a fix, an
escalation, a trap; the rule is `ci_sample` in tests/bench/corpus_subset.py) on one base
project through the real runner (`patchit bench --only ...`), real dbt, git and patchit
subprocesses. The Airflow part is tests/bench/test_corpus_quick_airflow.py (its own file, so
another xdist worker runs it beside this one). The full corpus is `patchit bench`; this keeps
each kind of verdict honest on every change."""

from __future__ import annotations

from typing import Any

import pytest

from patchit.bench.corpus_model import Scenario
from tests.bench.corpus_subset import (
    assert_as_expected,
    assert_summary_adds_up,
    bench_subset,
    by_name,
    ci_sample,
)

SAMPLE = ci_sample("dbt")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return bench_subset(tuple(s.name for s in SAMPLE), tmp_path_factory.mktemp("results"))


def test_the_sample_has_one_scenario_per_verdict_and_a_trap() -> None:
    # fast: the rule reads the corpus's TOML files, no run
    assert [s.expect for s in SAMPLE] == ["fixed", "escalated", "refused"]
    assert SAMPLE[2].trap and all(s.kind == "dbt" for s in SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SAMPLE, ids=lambda s: s.name)
def test_each_scenario_ends_as_expected(quick_run: dict[str, Any], scenario: Scenario) -> None:
    # fixed: its branch reproduces the good commit's values, by tier 0 alone; escalated: with
    # the expected class and no branch; the trap: no branch, no wrong fix
    assert_as_expected(scenario, by_name(quick_run)[scenario.name])


@pytest.mark.slow
def test_no_user_tree_is_touched_and_the_summary_adds_up(quick_run: dict[str, Any]) -> None:
    assert_summary_adds_up(SAMPLE, quick_run)

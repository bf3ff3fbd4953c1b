"""The CI subset of the corpus, its Airflow part: the first fixed Airflow-callback scenario
(`ci_sample` in tests/bench/corpus_subset.py) through the real runner (`patchit bench --only
...`), real Airflow, git and patchit subprocesses; the dbt part is
tests/bench/test_corpus_quick.py, run beside this file by another xdist worker. An escalation
or a refusal takes the judge's same path as dbt's (there); an escalation under real Airflow is
in tests/integrations/test_airflow_real.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bench.corpus_subset import (
    assert_as_expected,
    assert_summary_adds_up,
    bench_subset,
    by_name,
    ci_sample,
)

pytestmark = pytest.mark.slow

SAMPLE = ci_sample("airflow_callback", ("fixed",))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return bench_subset(tuple(s.name for s in SAMPLE), tmp_path_factory.mktemp("results"))


def test_the_fixed_branch_reproduces_the_good_commits_values(quick_run: dict[str, Any]) -> None:
    [scenario] = SAMPLE
    assert_as_expected(scenario, by_name(quick_run)[scenario.name])


def test_no_user_tree_is_touched_and_the_summary_adds_up(quick_run: dict[str, Any]) -> None:
    assert_summary_adds_up(SAMPLE, quick_run)

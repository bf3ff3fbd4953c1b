"""The CI subset of the corpus, its Airflow part: the task KeyError through the real runner
(`patchit bench --only af_key_typo`), real Airflow, git and patchit subprocesses; the dbt part
is tests/bench/test_corpus_quick.py, run beside this file by another xdist worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench.corpus_subset import assert_fixed_offline, bench_subset, by_name

pytestmark = pytest.mark.slow

QUICK = ("af_key_typo",)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return bench_subset(QUICK, tmp_path_factory.mktemp("results"))


def test_the_fixed_branch_reproduces_the_good_commits_values(quick_run: dict[str, Any]) -> None:
    assert_fixed_offline(by_name(quick_run)["af_key_typo"])


def test_no_user_tree_is_touched_and_the_summary_adds_up(quick_run: dict[str, Any]) -> None:
    [row] = quick_run["scenarios"]
    assert row["untouched"] and row["touched"] == [] and row["broken_fails"], row
    summary = quick_run["summary"]
    assert summary["scenarios"] == 1 and summary["wrong_fixes"] == 0
    assert summary["user_tree_touches"] == 0 and summary["runner_errors"] == 0
    assert summary["code_bugs"] == 1 and summary["code_bugs_fixed"] == 1
    assert quick_run["_exit"] == 0
    written = json.loads((quick_run["_results"] / "subset.json").read_text())
    assert written["summary"]["passed"] == summary["passed"] == 1
    assert (
        "| af_key_typo | airflow_callback | fixed | fixed | - | - | code_bug |"
        in (Path(quick_run["_results"]) / "subset.md").read_text()
    )

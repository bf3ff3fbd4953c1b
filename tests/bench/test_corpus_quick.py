"""The CI subset of the corpus, its dbt part: five scenarios on one base project through the
real runner (`patchit bench --only ...`), real dbt, git and patchit subprocesses. The Airflow
scenario is tests/bench/test_corpus_quick_airflow.py (its own file, so another xdist worker
runs it beside this one). The full corpus is `patchit bench`; this keeps one of each kind of
verdict honest on every change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench.corpus_subset import assert_fixed_offline, bench_subset, by_name

pytestmark = pytest.mark.slow

# the trap: reverting the breaking change would drop the new column it added, so the candidate
# that passes must end needs_review, never on a branch
QUICK = ("dbt_ref_typo", "dbt_data_null_country", "dbt_trap_revert_new_column",
         # a YAML file's unit: its fix is verified by building what the file describes
         "dbt_yaml_empty_tests",
         # a join that fans out: made once per key, the change's column kept
         "dbt_join_fanout")  # fmt: skip


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return bench_subset(QUICK, tmp_path_factory.mktemp("results"))


def test_the_fixed_branch_reproduces_the_good_commits_values(quick_run: dict[str, Any]) -> None:
    assert_fixed_offline(by_name(quick_run)["dbt_ref_typo"])
    assert_fixed_offline(by_name(quick_run)["dbt_yaml_empty_tests"])
    assert_fixed_offline(by_name(quick_run)["dbt_join_fanout"])


def test_bad_data_is_escalated_as_data_issue(quick_run: dict[str, Any]) -> None:
    row = by_name(quick_run)["dbt_data_null_country"]
    assert (row["outcome"], row["classification"]) == ("escalated", "data_issue"), row
    assert row["hidden_check"] == "n/a" and row["branch"] is None and row["passed"]


def test_the_trap_gets_no_branch(quick_run: dict[str, Any]) -> None:
    row = by_name(quick_run)["dbt_trap_revert_new_column"]
    assert not row["wrong_fix"] and row["outcome"] != "fixed" and row["branch"] is None, row
    assert row["passed"]


def test_no_user_tree_is_touched_and_the_summary_adds_up(quick_run: dict[str, Any]) -> None:
    rows = quick_run["scenarios"]
    assert [r["name"] for r in rows] == sorted(QUICK)
    assert all(r["untouched"] and r["touched"] == [] and r["broken_fails"] for r in rows)
    summary = quick_run["summary"]
    assert summary["scenarios"] == 5 and summary["wrong_fixes"] == 0
    assert summary["user_tree_touches"] == 0 and summary["runner_errors"] == 0
    assert summary["code_bugs"] == 3 and summary["code_bugs_fixed"] == 3
    assert summary["escalations"] == 1 and summary["escalation_accuracy"] == 1.0
    assert summary["traps"] == 1 and summary["traps_passed"] == 1
    assert quick_run["_exit"] == 0
    written = json.loads((quick_run["_results"] / "subset.json").read_text())
    assert written["summary"]["passed"] == summary["passed"] == 5
    assert (
        "| dbt_ref_typo | dbt | fixed | fixed | - | - | code_bug |"
        in (Path(quick_run["_results"]) / "subset.md").read_text()
    )

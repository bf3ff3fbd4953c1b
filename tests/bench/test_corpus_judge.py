"""Judging and summarising from observations, and the "untouched" state on real git repos."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import duckdb

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_env import db_content_hash, tree_state
from patchit.bench.corpus_judge import judge
from patchit.bench.corpus_model import load_corpus, projects_dir
from patchit.bench.corpus_report import markdown, summarise
from patchit.bench.corpus_run import BranchCheck, Observation, make_repo

BY_NAME = {s.name: s for s in load_corpus(DEFAULT_CORPUS)}
STATE = {"status": "", "head": "abc", "branch": "main", "other_worktrees": [], "data": "h"}


def observed(name: str, status: str, cls: str, **extra: Any) -> Observation:
    incident: dict[str, Any] = {"id": "20260115-abcdef", "status": status, "classification": cls,
                "attempts": 1, "branch": "patchit/20260115-abcdef" if status == "fixed" else None,
                "created_utc": "2026-01-15T09:00:00+00:00",
                "updated_utc": "2026-01-15T09:00:12+00:00"}  # fmt: skip
    obs = Observation(BY_NAME[name], good_value=[[1, "x"]], good_ok=True, broken_fails=True)
    obs.incidents = [incident]
    obs.reports = {incident["id"]: {"attempts": [{"tier": 0, "tokens": 0}]}}
    obs.user_state, obs.reference_state = dict(STATE), dict(STATE)
    for key, value in extra.items():
        setattr(obs, key, value)
    return obs


def test_a_fix_passes_only_when_the_branch_reproduces_the_good_values() -> None:
    good = BranchCheck("20260115-abcdef", "patchit/x", [[1, "x"]], True, ["a.sql"])
    result = judge(observed("dbt_column_typo", "fixed", "code_bug", branches=[good]))
    assert (result.passed, result.hidden_check, result.wrong_fix) == (True, "match", False)
    assert result.time_to_final_s == 12.0 and result.tiers == [0]
    wrong = BranchCheck("20260115-abcdef", "patchit/x", [[2, "x"]], True, ["a.sql"])
    result = judge(observed("dbt_column_typo", "fixed", "code_bug", branches=[wrong]))
    assert (result.passed, result.hidden_check, result.wrong_fix) == (False, "differs", True)
    broken = BranchCheck("20260115-abcdef", "patchit/x", None, False, ["a.sql"])
    assert judge(observed("dbt_column_typo", "fixed", "code_bug", branches=[broken])).wrong_fix


def test_escalations_need_the_expected_class_and_traps_no_wrong_branch() -> None:
    assert judge(observed("dbt_db_locked", "escalated", "infra_issue")).passed
    miss = judge(observed("dbt_db_locked", "escalated", "code_bug"))
    assert not miss.passed and "expected escalated infra_issue" in miss.reason
    assert judge(observed("dbt_trap_macro_tie", "failed", "code_bug")).passed
    wrong = BranchCheck("20260115-abcdef", "patchit/x", [[9, "vat"]], True, ["f.sql"])
    trap = judge(observed("dbt_trap_macro_tie", "fixed", "code_bug", branches=[wrong]))
    assert not trap.passed and trap.wrong_fix


def test_a_touched_tree_fails_the_scenario_and_is_counted() -> None:
    obs = observed("dbt_db_locked", "escalated", "infra_issue")
    obs.user_state = {**STATE, "data": "changed"}
    result = judge(obs)
    assert not result.passed and result.touched == ["data"] and not result.untouched
    summary = summarise([result, judge(observed("dbt_column_typo", "failed", "code_bug"))])
    assert (summary.user_tree_touches, summary.code_bugs, summary.code_bugs_fixed) == (1, 1, 0)
    assert summary.escalations == 1 and summary.escalation_accuracy == 0.0
    table = markdown([result], summary)
    assert "| dbt_db_locked | dbt | escalated infra_issue |" in table and "| NO | no |" in table


def test_tree_state_sees_ignored_files_branches_worktrees_and_db_content(tmp_path: Path) -> None:
    repo = tmp_path / "user"
    make_repo(projects_dir(DEFAULT_CORPUS) / "billing", repo, BY_NAME["dbt_ref_typo"])
    db = repo / "billing.duckdb"
    con = duckdb.connect(str(db))
    con.execute("create table t as select 1 as a")
    con.close()
    before = tree_state(repo, db)
    assert before["branch"] == "main" and before["other_worktrees"] == []
    assert tree_state(repo, db) == before
    (repo / "target").mkdir()
    (repo / "target" / "run_results.json").write_text("{}")
    assert tree_state(repo, db)["status"] != before["status"]  # an ignored file counts
    (repo / "target" / "run_results.json").unlink()
    (repo / "target").rmdir()
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")],
                   check=True)  # fmt: skip
    assert tree_state(repo, db)["other_worktrees"] == [str(tmp_path / "wt")]
    con = duckdb.connect(str(db))
    con.execute("insert into t values (2)")
    con.close()
    assert db_content_hash(db) != before["data"]
    assert db_content_hash(tmp_path / "none.duckdb") == "absent"


def test_db_content_hash_reads_a_broken_view_by_its_definition(tmp_path: Path) -> None:
    """A failed dbt run can leave a view whose SQL no longer evaluates (a bad cast)."""
    db = tmp_path / "user.duckdb"
    con = duckdb.connect(str(db))
    con.execute("create table raw as select 'never' as cancelled_on")
    con.execute("create view stg as select cast(cancelled_on as date) as d from raw")
    con.close()
    first = db_content_hash(db)
    assert first == db_content_hash(db) and first != "absent"
    con = duckdb.connect(str(db))
    con.execute("create or replace view stg as select cancelled_on as d from raw")
    con.close()
    assert db_content_hash(db) != first

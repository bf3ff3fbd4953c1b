"""Judging and summarising from observations, and the "untouched" state on real git repos."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import duckdb

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_env import db_content_hash, tree_state
from patchit.bench.corpus_judge import judge
from patchit.bench.corpus_keeps import Keep, keeps_missing
from patchit.bench.corpus_model import load_corpus, projects_dir
from patchit.bench.corpus_report import markdown, summarise
from patchit.bench.corpus_run import BranchCheck, Observation, make_repo
from patchit.bench.corpus_runtimes import query_rows

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


def test_a_branch_that_reverts_an_intent_is_a_wrong_fix_not_fixed() -> None:
    """A revert restores the good values, so the hidden check matches: only `keeps` sees it."""
    kept = BranchCheck("20260115-abcdef", "patchit/x", [[1, "x"]], True, ["a.sql"])
    result = judge(observed("dbt_upstream_rename", "fixed", "code_bug", branches=[kept]))
    assert (result.passed, result.intent_kept, result.reverts) == (True, True, False)
    undone = "models/staging/stg_subscriptions.sql keeps 'plan_code as plan_id'"
    revert = BranchCheck("20260115-abcdef", "patchit/x", [[1, "x"]], True, ["s.sql"], "", [undone])
    result = judge(observed("dbt_upstream_rename", "fixed", "code_bug", branches=[revert]))
    assert result.hidden_check == "match" and not result.passed
    assert (result.intent_kept, result.reverts, result.wrong_fix) == (False, True, True)
    assert result.keeps_missing == [undone] and "reverts the change's intent" in result.reason
    trap = judge(observed("dbt_trap_revert_new_column", "fixed", "code_bug", branches=[revert]))
    assert not trap.passed and trap.reverts
    no_keeps = judge(observed("dbt_column_typo", "fixed", "code_bug", branches=[kept]))
    assert no_keeps.intent_kept is None and not no_keeps.reverts
    escalated = judge(observed("dbt_upstream_rename", "escalated", "code_bug"))
    assert escalated.intent_kept is None and not escalated.reverts
    summary = summarise([result, no_keeps, escalated])
    assert (summary.reverts, summary.wrong_fixes, summary.code_bugs_fixed) == (1, 1, 1)
    assert (summary.intents_judged, summary.intents_kept) == (1, 0)
    table = markdown([result, no_keeps], summary)
    assert "| outcome | intent kept | reverts |" in table
    assert "| dbt_upstream_rename | dbt | fixed | fixed | NO | YES |" in table
    assert "| dbt_column_typo | dbt | fixed | fixed | - | - |" in table
    assert "reverts of an intent: 1" in table


def test_a_breaking_commit_without_its_own_keeps_is_a_corpus_error() -> None:
    obs = observed("dbt_upstream_rename", "fixed", "code_bug")
    obs.keeps_not_in_change = ["models/x.sql keeps 'y'"]
    result = judge(obs)
    assert not result.passed and result.reason.startswith("corpus error: the breaking commit")


def test_keeps_are_read_from_a_real_checkout_and_its_database(tmp_path: Path) -> None:
    scenario = BY_NAME["dbt_upstream_rename"]
    project = projects_dir(DEFAULT_CORPUS) / "billing"
    broken, good = tmp_path / "broken", tmp_path / "good"
    make_repo(project, broken, scenario)
    make_repo(project, good, None)
    text_keeps = [k for k in scenario.keeps if k.sql is None]
    assert len(text_keeps) == 2 and keeps_missing(scenario.keeps, broken, None) == []
    assert len(keeps_missing(scenario.keeps, good, None)) == 2  # the revert loses both
    for tree, column in ((broken, "plan_id"), (good, "plan_code")):
        con = duckdb.connect(str(tree / "billing.duckdb"))
        con.execute(f"create table stg_subscriptions as select 'pro' as {column}")
        con.close()

    def ask(tree: Path) -> Any:
        return lambda sql: query_rows(tree / "billing.duckdb", sql)

    assert keeps_missing(scenario.keeps, broken, ask(broken)) == []
    missing = keeps_missing(scenario.keeps, good, ask(good))
    assert missing[-1] == "query `select plan_id from stg_subscriptions limit 1` runs"
    # re-indented or re-wrapped, the kept text still counts
    sql = broken / "models/staging/stg_subscriptions.sql"
    sql.write_text(sql.read_text().replace("plan_code as plan_id", "plan_code\n  as   plan_id"))
    assert keeps_missing(text_keeps, broken, None) == []
    expected = Keep(sql="select count(*) from stg_subscriptions", rows=[[2]])
    assert keeps_missing([expected], broken, ask(broken)) == [expected.describe()]

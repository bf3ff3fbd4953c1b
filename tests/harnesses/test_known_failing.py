"""What a dbt verification sets aside: nodes outside the incident that were failing on this
line before the candidate (`loop.known_failing`, `harnesses.dbt.units.judge_with_known`).
Real git and a real SQLite memory; no dbt process (the loop test is
tests/test_loop_known_failing.py)."""

from __future__ import annotations

from pathlib import Path

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.harnesses.dbt.units import DbtOutcome, judge_with_known
from patchit.loop.known_failing import for_candidate, known_failing, with_known_failing
from patchit.memory import Memory
from patchit.memory.runlog import UnitRun
from tests.conftest import commit_all, git

UNIT, KNOWN = "model.shop.stg_customers", "model.shop.customer_emails"


def ok(unique_id: str, status: str = "success") -> dict[str, str]:
    return {"unique_id": unique_id, "status": status, "message": "", "resource_type": "model"}


def test_a_known_failure_is_set_aside_and_what_it_skipped_with_it() -> None:
    test_of_known = "test.shop.not_null_customer_emails_email.1a"
    again = DbtOutcome(
        success=False, results=[ok(UNIT), ok(KNOWN, "error"), ok(test_of_known, "skipped")]
    )
    assert judge_with_known(again, UNIT, (), [KNOWN]) == (True, [], [KNOWN, test_of_known])
    # without it known, the same run is no fix (as before)
    assert judge_with_known(again, UNIT) == (False, [KNOWN, test_of_known], [])


def test_the_incident_must_still_pass_and_nothing_else_may_fail() -> None:
    unit_fails = DbtOutcome(success=False, results=[ok(UNIT, "error"), ok(KNOWN, "error")])
    assert judge_with_known(unit_fails, UNIT, (), [KNOWN])[:2] == (False, [UNIT])
    # an incident unit is never set aside, even when memory lists it
    assert judge_with_known(unit_fails, UNIT, (), [UNIT, KNOWN])[:2] == (False, [UNIT])
    other = DbtOutcome(
        success=False,
        results=[ok(UNIT), ok(KNOWN, "error"), ok("model.shop.orders", "error"),
                 ok("model.shop.customers", "skipped")],
    )  # fmt: skip
    passed, failures, set_aside = judge_with_known(other, UNIT, (), [KNOWN])
    assert not passed and set_aside == [KNOWN]
    assert failures == ["model.shop.orders", "model.shop.customers"]  # skipped: counted
    crashed = DbtOutcome(success=False, exception="boom", results=[ok(UNIT), ok(KNOWN, "error")])
    assert judge_with_known(crashed, UNIT, (), [KNOWN])[0] is False
    timed_out = DbtOutcome(success=False, timed_out=True, results=[ok(UNIT), ok(KNOWN, "error")])
    assert judge_with_known(timed_out, UNIT, (), [KNOWN])[0] is False


def _event(repo: Path, commit: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id=UNIT, repo_path=str(repo),
        commit=commit, error_type="Binder Error", error_message="frist_name",
        dbt=DbtInvocation(command="build", args=["build"], cwd=str(repo), project_dir=str(repo)),
    )  # fmt: skip


def test_known_means_last_run_failed_on_this_line(tmp_path: Path, _patchit_home: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "m.sql").write_text("select 1\n")
    commit_all(repo, "first")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "f.sql").write_text("select 1\n")
    feature = commit_all(repo, "elsewhere")
    git(repo, "checkout", "-q", "-")
    (repo / "m.sql").write_text("select frist_name\n")
    failing = commit_all(repo, "break")
    event = _event(repo, failing)
    runs = [
        UnitRun(str(repo), KNOWN, base, passed=False),  # failing on this line: known
        UnitRun(str(repo), "model.shop.fixed", base, passed=False),
        UnitRun(str(repo), "model.shop.fixed", failing, passed=True),  # its last run passed
        UnitRun(str(repo), "model.shop.branchy", feature, passed=False),  # another line
        UnitRun(str(repo), UNIT, failing, passed=False),  # the incident's own
        UnitRun(str(repo), "model.shop.unknown_commit", "0" * 40, passed=False),
    ]
    with Memory.open(_patchit_home) as memory:
        for n, run in enumerate(runs):
            memory.record_unit_runs([UnitRun(**{**run.__dict__, "run_utc": f"2026-01-0{n + 1}"})])
        assert known_failing(memory, event, [UNIT]) == [KNOWN]
        marked = with_known_failing(memory, event)
        assert marked.context["known_failing"] == [KNOWN]
        airflow = event.model_copy(update={"source": FailureSource.AIRFLOW})
        assert known_failing(memory, airflow, [UNIT]) == []
    # a candidate that edits the known model's file is judged on it like any node
    assert for_candidate(marked, ["models/marts/customer_emails.sql"]).context[
        "known_failing"
    ] == []  # fmt: skip
    assert for_candidate(marked, ["models/staging/stg_customers.sql"]) is marked

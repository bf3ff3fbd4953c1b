"""The partial revert in the loop: with the FakeHarness running the real script (fast), and on
real dbt (slow): a verified branch that restores only the typo, and a trap that would drop an
intended new column and must end `needs_review`."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.harnesses.fake import FakeHarness, fake_verification
from patchit.loop.context import Context
from patchit.loop.loop import HealOutcome, heal
from patchit.memory import Memory
from patchit.patching.revert import PartialRevertStrategy
from tests.conftest import commit_all, git, user_dbt_events
from tests.evidence.airflow_failures import init_repo, run_script, script_failure
from tests.patching.test_revert import GOOD, JOB, SCALED

MODEL = "models/marts/daily_revenue.sql"


def script_harness() -> FakeHarness:
    """Runs the patched script for real with Python: passes when it exits 0."""

    def handler(ws: Workspace, event: UniversalFailureEvent) -> Verification:
        proc = run_script(ws.root, JOB)
        return fake_verification(event, proc.returncode == 0, proc.stderr[-800:] or "ok")

    return FakeHarness(handler, watch=(JOB,))


def heal_script(tmp_path: Path, home: Path, broken: str) -> tuple[HealOutcome, Memory, Path]:
    repo = init_repo(tmp_path / "repo")
    (repo / JOB).parent.mkdir(parents=True)
    (repo / JOB).write_text(GOOD)
    commit_all(repo, "totals")
    event = script_failure(repo, JOB, broken, "total")
    memory = Memory.open(home)
    ctx = Context(home, memory, PatchitConfig(), [PartialRevertStrategy()], [script_harness()])
    try:
        return heal(event, ctx), memory, repo
    finally:
        ctx.close()


def test_a_token_revert_lands_on_a_branch_and_keeps_the_rest_of_the_change(
    tmp_path: Path, _patchit_home: Path
) -> None:
    outcome, memory, repo = heal_script(tmp_path, _patchit_home, SCALED)
    incident = outcome.incident
    assert incident.status == "fixed" and incident.branch
    fixed = git(repo, "show", f"{incident.branch}:{JOB}")
    assert 'sum(row["amount"] * scale for row in rows)' in fixed
    assert "def total(rows, scale=1):" in fixed
    [attempt] = memory.attempts_for(incident.id)
    assert (attempt.strategy, attempt.outcome) == ("partial_revert", "verified")
    assert attempt.tag.startswith("partial_revert:")
    report = Path(incident.report_md or "").read_text()
    assert "partial revert of the change" in report and "kept 2 other edit(s)" in report
    memory.close()


def test_dropping_new_behaviour_ends_needs_review_with_no_branch(
    tmp_path: Path, _patchit_home: Path
) -> None:
    broken = GOOD.replace(
        "print(total(rows))", 'print(total(rows))\nprint(max(row["amout"] for row in rows))'
    )
    outcome, memory, repo = heal_script(tmp_path, _patchit_home, broken)
    incident = outcome.incident
    assert (incident.status, incident.branch, incident.needs_human) == ("escalated", None, True)
    assert memory.get_incident(incident.id).needs_review
    [attempt] = memory.attempts_for(incident.id)
    assert attempt.outcome == "needs_review"
    assert git(repo, "branch", "--list", "patchit/*") == ""
    report = Path(incident.report_md or "").read_text()
    assert "drops code the breaking change added" in report
    assert '-print(max(row["amout"] for row in rows))' in report  # the candidate is shown
    memory.close()


# -- real dbt -------------------------------------------------------------------------------


def dbt_failure(repo: Path, old: str, new: str) -> UniversalFailureEvent:
    model = repo / MODEL
    text = model.read_text()
    assert text.count(old) == 1
    model.write_text(text.replace(old, new))
    commit_all(repo, "daily_revenue: rework the columns")
    code, [event] = user_dbt_events(repo, ["build"])
    assert code == 1
    return event


def heal_dbt(event: UniversalFailureEvent, home: Path) -> tuple[HealOutcome, Memory]:
    memory = Memory.open(home)
    harness = DbtHarness(timeout_s=300)
    ctx = Context(home, memory, PatchitConfig(), [PartialRevertStrategy()], [harness])
    try:
        return heal(event, ctx), memory
    finally:
        ctx.close()


@pytest.mark.slow
def test_real_dbt_reverts_only_the_typo_of_a_rewritten_model(
    shop_repo: Path, _patchit_home: Path
) -> None:
    # one commit rewrites a column, adds a new one and misspells a third
    event = dbt_failure(
        shop_repo,
        "    count(*) as orders,\n    sum(amount) as revenue\n",
        "    count(order_id) as orders,\n    count(distinct customer_id) as customers,\n"
        "    sum(amout) as revenue\n",
    )
    outcome, memory = heal_dbt(event, _patchit_home)
    incident = outcome.incident
    attempts = memory.attempts_for(incident.id)
    assert incident.status == "fixed", [(a.outcome, a.reason) for a in attempts]
    fixed = git(shop_repo, "show", f"{incident.branch}:{MODEL}")
    assert "sum(amount) as revenue" in fixed
    assert "count(order_id) as orders," in fixed and "as customers," in fixed
    assert [a.outcome for a in attempts] == ["verified"]
    assert "data check" in attempts[0].verification_output.lower()
    memory.close()


@pytest.mark.slow
def test_real_dbt_trap_a_revert_dropping_a_new_column_needs_review(
    shop_repo: Path, _patchit_home: Path
) -> None:
    # the new column itself is the broken line: the only revert drops it
    event = dbt_failure(
        shop_repo,
        "    sum(amount) as revenue\n",
        "    sum(amount) as revenue,\n    sum(amout) filter (where status = 'completed') as net\n",
    )
    outcome, memory = heal_dbt(event, _patchit_home)
    incident = outcome.incident
    attempts = memory.attempts_for(incident.id)
    assert (incident.status, incident.branch) == ("escalated", None)
    assert attempts[-1].outcome == "needs_review"
    assert "drops code the breaking change added" in attempts[-1].verification_output
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    memory.close()

"""Outcome tracking: a landed fix (real git, FakeHarness heal) judged after merge from the runs
recorded since: pending, fixed (merge or squash), no_effect and regression reopen it."""

from __future__ import annotations

from pathlib import Path

from patchit.config import PatchitConfig
from patchit.delivery.track import track
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.loop.context import Context
from patchit.memory import Incident, Memory
from patchit.memory.outcomes import UnitRun
from tests.conftest import git
from tests.test_loop_fast import JOB, RIGHT, Scripted, edit, run

UNIT = "scripts.total"  # an Airflow unit: <dag_id>.<task_id>


def healed(event: UniversalFailureEvent, memory: Memory, home: Path) -> Incident:
    ctx = Context(home, memory, PatchitConfig(), [Scripted([edit(RIGHT, "rename_key")])],
                  [FakeHarness.passing_when(JOB, RIGHT)])  # fmt: skip
    incident = run(ctx, event).incident
    assert incident.status == "fixed"
    return incident


def ran(memory: Memory, repo: Path, unit: str, passed: bool, fingerprint: str = "") -> None:
    commit = git(repo, "rev-parse", "HEAD")
    memory.record_unit_runs([UnitRun(str(repo), unit, commit, passed, fingerprint)])


def test_pending_until_merged_then_fixed_after_a_green_run(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    ran(memory, repo, UNIT, False, incident.fingerprint)  # the failure, before the merge
    said: list[str] = []
    found = track(memory, said.append)
    assert len(found) == 1, (said, memory.list_incidents())
    [outcome] = found
    assert (outcome.outcome, outcome.detail) == ("pending", "not merged into main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge the fix", incident.branch or "")
    [outcome] = track(memory)
    assert outcome.outcome == "pending" and "no run of scripts.total" in outcome.detail
    ran(memory, repo, UNIT, True)
    [outcome] = track(memory)
    assert (outcome.outcome, outcome.merged_into) == ("fixed", "main")
    assert memory.get_incident(incident.id).outcome == "fixed"


def test_a_squash_merge_is_recognised(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--squash", incident.branch or "")
    git(repo, "commit", "-q", "-m", "squashed: fix totals")
    ran(memory, repo, UNIT, True)
    assert [o.outcome for o in track(memory)] == ["fixed"]


def test_the_same_failure_after_merge_is_no_effect_and_reopens(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", incident.branch or "")
    ran(memory, repo, UNIT, False, incident.fingerprint)
    [outcome] = track(memory)
    assert outcome.outcome == "no_effect"
    reopened = memory.get_incident(incident.id)
    assert (reopened.status, reopened.needs_human, reopened.outcome) == ("open", True, "no_effect")
    assert incident.branch and incident.branch in reopened.summary
    assert track(memory) == []  # judged for good: not tracked again


def test_the_same_failure_after_passing_with_the_fix_is_a_regression(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", incident.branch or "")
    ran(memory, repo, UNIT, True)
    assert [o.outcome for o in track(memory)] == ["fixed"]
    assert "| after merge | **fixed** |" in Path(incident.report_md or "").read_text()
    ran(memory, repo, UNIT, False, incident.fingerprint)
    assert [o.outcome for o in track(memory)] == ["regression"]
    assert memory.get_incident(incident.id).status == "open"
    report = Path(incident.report_md or "").read_text()  # re-rendered on every change
    assert "| after merge | **regression** |" in report and "incident " in report
    assert report.startswith(f"# patchit incident {incident.id}: OPEN")
    html = Path(incident.report_md or "").with_suffix(".html").read_text()  # and the HTML one
    assert "<th>after merge</th><td><strong>regression</strong>" in html
    assert '<span class="badge status-open">open</span>' in html


def test_a_later_commits_new_failure_is_not_blamed_on_the_fix(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", incident.branch or "")
    ran(memory, repo, UNIT, True)
    (repo / "later.txt").write_text("x")
    git(repo, "add", "later.txt")
    git(repo, "commit", "-q", "-m", "later work")
    ran(memory, repo, "report", False, "fp-new-later")  # a later commit's own failure
    assert [o.outcome for o in track(memory)] == ["fixed"]


def test_a_new_failure_where_the_fix_first_ran_is_a_regression(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    ran(memory, repo, "downstream_total", False, "fp-old")  # failing before: not the fix's
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", incident.branch or "")
    ran(memory, repo, UNIT, True)
    ran(memory, repo, "downstream_total", False, "fp-old")
    ran(memory, repo, "export_total", False, "fp-downstream")
    [outcome] = track(memory)
    assert outcome.outcome == "regression" and "export_total" in outcome.detail
    reopened = memory.get_incident(incident.id)
    assert reopened.status == "open" and outcome.fix_commit[:12] in reopened.summary


def test_a_new_failure_in_a_first_run_that_brought_other_changes_is_not_the_fixs(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    # `make demo`'s sequence: the fix merged fast-forward, then new data committed; the first
    # run with the fix is at that commit and a data test fails there: not the fix's doing
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--ff-only", incident.branch or "")
    (repo / "seeds.csv").write_text("id,email\n7,\n")
    git(repo, "add", "seeds.csv")
    git(repo, "commit", "-q", "-m", "seeds: load March customers")
    ran(memory, repo, UNIT, True)
    ran(memory, repo, "not_null_email", False, "fp-data")
    assert [o.outcome for o in track(memory)] == ["fixed"]
    assert memory.get_incident(incident.id).status == "fixed"


def test_the_worker_tracks_outcomes(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    from patchit.worker.worker import Worker

    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", incident.branch or "")
    ran(memory, repo, UNIT, True)
    said: list[str] = []
    Worker(_patchit_home, say=said.append).run(once=True)
    assert memory.get_incident(incident.id).outcome == "fixed"
    assert any(f"incident {incident.id}: fixed" in s for s in said), said

"""The lifecycle through the loop (FakeHarness, a real git repo and memory): a retry heals the
failure as it stands on today's commit, and every change to an incident re-renders its report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.loop.recurrence import REANCHORED, at_head
from patchit.memory import IncidentStatus, Memory
from patchit.memory.lifecycle import Trigger
from patchit.patching.base import Edit, PatchCandidate
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo, run_script, script_failure
from tests.test_loop_fast import JOB, RIGHT, SOURCE, Scripted, edit, make_ctx, run, user_tree


@pytest.fixture
def event(tmp_path: Path) -> UniversalFailureEvent:
    return script_failure(init_repo(tmp_path / "repo"), JOB, SOURCE, "total")


@pytest.fixture
def memory(_patchit_home: Path) -> Iterator[Memory]:
    with Memory.open(_patchit_home) as memory:
        yield memory


def report_of(path: str | None) -> dict[str, object]:
    assert path
    return dict(json.loads(Path(path).read_text()))


def test_at_head_is_the_same_event_until_the_repository_moves_on(
    event: UniversalFailureEvent,
) -> None:
    repo = Path(event.repo_path or "")
    assert at_head(event, repo) is event
    (repo / "README.md").write_text("notes\n")
    head = commit_all(repo, "docs")
    moved = at_head(event, repo)
    assert moved.commit == head and moved.event_id != event.event_id
    assert moved.context[REANCHORED] == event.commit
    assert (moved.unit_id, moved.error_message) == (event.unit_id, event.error_message)


def test_a_retry_after_more_commits_heals_on_head_and_keeps_the_old_event(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    harness = FakeHarness.passing_when(JOB, RIGHT)
    first = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), event)
    assert first.incident.status == "failed"
    (repo / "README.md").write_text("more work\n")  # the user went on; the bug is still there
    head = commit_all(repo, "docs: more work")
    before = user_tree(repo)

    memory.transition(first.incident.id, Trigger.RETRY)  # what `patchit heal ID` does
    fresh = at_head(memory.latest_event(first.incident.id) or event, repo)
    again = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), fresh)

    assert again.incident.id == first.incident.id and again.incident.status == "fixed"
    assert [e.commit for e in memory.events_for(again.incident.id)] == [event.commit, head]
    assert len(harness.calls) >= 2  # the reproduction at HEAD, then the candidate
    assert not harness.calls[-2].result.passed  # HEAD unchanged still fails
    report = report_of(again.incident.report_md and again.incident.report_json)
    assert report["commit"] == head and report["events"] == 2
    assert user_tree(repo) == before


def test_a_retry_when_head_no_longer_fails_stops_without_a_fix(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    harness = FakeHarness.passing_when(JOB, RIGHT)
    first = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), event)
    (repo / JOB).write_text((repo / JOB).read_text().replace('row["amout"]', RIGHT))
    head = commit_all(repo, "totals: fixed by hand")

    memory.transition(first.incident.id, Trigger.RETRY)
    fresh = at_head(memory.latest_event(first.incident.id) or event, repo)
    strategy = Scripted([edit(RIGHT)])
    again = run(make_ctx(_patchit_home, memory, [strategy], [harness]), fresh)

    assert again.incident.status == "escalated" and again.incident.branch is None
    assert strategy.requests == []  # nothing was proposed for a failure that is gone
    report = report_of(again.incident.report_json)
    assert f"no longer reproduces at {head[:12]}" in str(report["stop_reason"])
    assert memory.attempts_for(again.incident.id) == []


def test_a_recurrence_re_renders_the_report(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    harness = FakeHarness.passing_when(JOB, RIGHT)
    first = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    assert first.incident.status == "fixed"
    assert report_of(first.incident.report_json)["events"] == 1
    (repo / "README.md").write_text("unrelated\n")
    head = commit_all(repo, "docs")
    recurrence = at_head(event, repo)  # the same failure, seen again on a later commit

    again = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), recurrence)

    assert again.incident.status == "fixed"
    report = report_of(again.incident.report_json)
    assert report["events"] == 2 and report["latest_commit"] == head
    assert report["status"] == "fixed" and report["commit"] == event.commit
    markdown = Path(again.incident.report_md or "").read_text()
    assert "| events | 2, the last on " in markdown and head[:12] in markdown


LOADER = "dags/load.py"
LOADER_SOURCE = """\
import csv
from pathlib import Path


def load():
    with open(Path(__file__).parent / "orders.csv") as f:
        return [int(row["{column}"]) for row in csv.DictReader(f)]


print(sum(load()))
"""


def failing_now(repo: Path) -> UniversalFailureEvent:
    """Run the loader as committed at HEAD (real Python) and return its failure as an event."""
    from patchit.intake.airflow_scan import split_error

    proc = run_script(repo, LOADER)
    assert proc.returncode == 1, proc.stdout
    error_type, message = split_error(proc.stderr)
    return UniversalFailureEvent(
        source="airflow", pipeline_id="scripts", unit_id="load", unit_path=LOADER,
        error_type=error_type, error_message=message, traceback=proc.stderr,
        repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
    )  # fmt: skip


def test_a_recurrence_with_another_class_opens_a_new_incident(
    tmp_path: Path, memory: Memory, _patchit_home: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "dags").mkdir()
    (repo / "dags" / "orders.csv").write_text("amount,day\n12,mon\n30,tue\n")
    script_failure_ok = LOADER_SOURCE.replace("{column}", "amount")
    (repo / LOADER).write_text(script_failure_ok)
    commit_all(repo, "loader")
    # 1. bad data: a value that is not an int, the code unchanged -> data_issue, escalated
    (repo / "dags" / "orders.csv").write_text("amount,day\n12,mon\n3O,tue\n")
    commit_all(repo, "orders: new export")
    bad_data = failing_now(repo)
    harness = FakeHarness.passing_when(LOADER, '"amount"')
    first = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), bad_data)
    assert (first.incident.status, first.incident.classification) == ("escalated", "data_issue")

    # 2. the data is fixed, but a code change now reads the wrong column: the same error
    (repo / "dags" / "orders.csv").write_text("amount,day\n12,mon\n30,tue\n")
    (repo / LOADER).write_text(LOADER_SOURCE.replace("{column}", "day"))
    commit_all(repo, "loader: by day")
    code_bug = failing_now(repo)
    assert "invalid literal for int()" in code_bug.error_message
    strategy = Scripted(
        [PatchCandidate(strategy="scripted", tag="other", rationale="the amount column",
                        edits=[Edit(path=LOADER, search='row["day"]', replace='row["amount"]')])]
    )  # fmt: skip
    second = run(make_ctx(_patchit_home, memory, [strategy], [harness]), code_bug)

    assert second.created and second.incident.id != first.incident.id
    assert (second.incident.status, second.incident.classification) == ("fixed", "code_bug")
    assert [e.event_id for e in memory.events_for(first.incident.id)] == [bad_data.event_id]
    assert [e.event_id for e in memory.events_for(second.incident.id)] == [code_bug.event_id]
    old = memory.get_incident(first.incident.id)
    assert (old.status, old.classification) == (IncidentStatus.ESCALATED, "data_issue")


def test_a_recurrence_of_the_same_class_stays_attached(
    tmp_path: Path, memory: Memory, _patchit_home: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "dags").mkdir()
    source = LOADER_SOURCE.replace("{column}", "amount")
    (repo / LOADER).write_text(source)
    (repo / "dags" / "orders.csv").write_text("amount\n12\n")
    commit_all(repo, "loader")
    (repo / "dags" / "orders.csv").write_text("amount\n1x\n")
    commit_all(repo, "orders: export 1")
    first_event = failing_now(repo)
    harness = FakeHarness.passing_when(LOADER, '"amount"')
    first = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), first_event)
    assert first.incident.classification == "data_issue"
    (repo / "dags" / "orders.csv").write_text("amount\n1x\n5\n")  # bad again, a new commit
    commit_all(repo, "orders: export 2")
    again = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), failing_now(repo))
    assert not again.created and again.incident.id == first.incident.id
    assert again.incident.events == 2

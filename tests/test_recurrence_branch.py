"""A recurrence of a fixed incident names its fix branch only where the repository holds it:
a repository re-created at the same path (or whose branch was deleted) is told the branch is
not there, not sent to check out a branch that does not exist. Real git; the runtime is the
library's FakeHarness."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.memory import Memory
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo, script_failure
from tests.test_loop_fast import JOB, RIGHT, SOURCE, Scripted, edit, make_ctx, run


def heal_twice(
    home: Path, memory: Memory, event: UniversalFailureEvent, between: object = None
) -> tuple[str, str | None, str | None, list[str]]:
    said: list[str] = []
    harness = FakeHarness.passing_when(JOB, RIGHT)
    first = run(make_ctx(home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    assert first.incident.status == "fixed" and first.incident.branch
    if callable(between):
        between()
    ctx = make_ctx(home, memory, [Scripted([edit(RIGHT)])], [harness])
    ctx.say = said.append
    again = run(ctx, event.model_copy(update={"event_id": "again"}))
    assert (again.incident.id, again.created) == (first.incident.id, False)
    return (
        first.incident.branch,
        again.incident.branch,
        memory.get_incident(first.incident.id).branch,
        said,
    )


def test_a_recurrence_in_the_same_repository_names_its_branch(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    branch, shown, stored, said = heal_twice(_patchit_home, memory, event)
    assert shown == stored == branch
    assert not any("is not in" in line for line in said)


def test_a_repository_re_created_at_the_same_path_is_not_sent_to_a_missing_branch(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")

    def recreate() -> None:
        shutil.rmtree(repo)
        init_repo(repo)
        (repo / JOB).parent.mkdir(parents=True)
        (repo / JOB).write_text(SOURCE)
        commit_all(repo, "the same job, a new history")

    branch, shown, stored, said = heal_twice(_patchit_home, memory, event, recreate)
    assert shown is None
    assert stored == branch  # the record is kept: the incident was fixed, elsewhere
    assert any(f"its fix branch {branch} is not in {repo}" in line for line in said), said


def test_a_branch_of_that_name_from_another_history_is_not_named(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")

    def recreate_with_branch() -> None:
        name = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/patchit/")
        shutil.rmtree(repo)
        init_repo(repo)
        (repo / "other.txt").write_text("another project\n")
        commit_all(repo, "another history")
        git(repo, "branch", name.strip())

    _branch, shown, _stored, _said = heal_twice(_patchit_home, memory, event, recreate_with_branch)
    assert shown is None


@pytest.fixture
def event(tmp_path: Path) -> UniversalFailureEvent:
    return script_failure(init_repo(tmp_path / "repo"), JOB, SOURCE, "total")


@pytest.fixture
def memory(_patchit_home: Path) -> Iterator[Memory]:
    with Memory.open(_patchit_home) as memory:
        yield memory

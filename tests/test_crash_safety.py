"""A heal killed at any point loses nothing: the verified fix lands on the next run, what the
dead run left is cleared at the next run's start, its open incident is resumed, and a fixed
incident stays fixed.

Each "kill" is real: the heal runs in a forked child that dies with `os._exit` (no `finally`,
no cleanup, as under SIGKILL) at the chosen point. The runtime is the library's FakeHarness;
the failures, the git repositories and the SQLite files are real.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from click.testing import CliRunner

from patchit.cli.main import cli
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.fake import FakeHarness
from patchit.intake.spool import Spool
from patchit.loop.context import Context
from patchit.loop.faults import CHECKPOINTS, FAULT_ENV
from patchit.loop.loop import heal
from patchit.loop.recovery import sweep_dead_runs
from patchit.memory import Memory
from patchit.state.liveness import claim_owner
from patchit.worker.worker import Worker
from tests.conftest import git
from tests.evidence.airflow_failures import init_repo, script_failure
from tests.test_loop_fast import JOB, RIGHT, SOURCE, Scripted, edit, make_ctx, run, user_tree

KILLED = 137


def die(*_args: Any, **_kwargs: Any) -> NoReturn:
    os._exit(KILLED)  # no finally, no atexit: what SIGKILL leaves


def killed(target: Callable[[], object]) -> int | None:
    """Run `target` in a forked child that is expected to die; its exit code."""
    proc = mp.get_context("fork").Process(target=target)
    proc.start()
    proc.join(120)
    return proc.exitcode


@pytest.fixture
def event(tmp_path: Path) -> UniversalFailureEvent:
    repo = init_repo(tmp_path / "repo")
    return script_failure(repo, JOB, SOURCE, "total")


@pytest.fixture
def memory(_patchit_home: Path) -> Iterator[Memory]:
    with Memory.open(_patchit_home) as memory:
        yield memory


def heal_in_child(home: Path, event: UniversalFailureEvent, harness: FakeHarness) -> None:
    with Memory.open(home) as memory:
        heal(event, make_ctx(home, memory, [Scripted([edit(RIGHT)])], [harness]))


def stray(home: Path, repo: Path) -> dict[str, list[str]]:
    """What a run left: entries under worktrees/ and sandboxes/, git's worktree records."""
    listed = git(repo, "worktree", "list", "--porcelain").count("worktree ") - 1
    return {
        "worktrees": sorted(p.name for p in (home / "worktrees").glob("*")),
        "sandboxes": sorted(p.name for p in (home / "sandboxes").glob("*")),
        "registered": [str(listed)] if listed else [],
    }


NOTHING: dict[str, list[str]] = {"worktrees": [], "sandboxes": [], "registered": []}


@pytest.mark.parametrize("where", ["create_branch", "commit_patch", "mark_landed"])
def test_a_fix_verified_before_the_kill_lands_on_the_next_run_without_a_new_verification(
    where: str, event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    before = user_tree(repo)

    def first_run() -> None:
        import patchit.loop.landing
        import patchit.memory.attempts

        if where == "mark_landed":  # killed after the branch exists, before memory knows it
            patchit.memory.attempts.AttemptStore.mark_landed = die  # type: ignore[method-assign]
        else:  # killed after the data check passed, before the branch was made
            setattr(patchit.loop.landing, where, die)
        heal_in_child(_patchit_home, event, FakeHarness.passing_when(JOB, RIGHT))

    assert killed(first_run) == KILLED
    [left] = memory.list_incidents()
    assert left.status == "open" and [a.outcome for a in memory.attempts_for(left.id)] == [
        "verified"
    ]

    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    incident = outcome.incident
    assert (incident.id, incident.status, incident.branch) == (
        left.id, "fixed", f"patchit/{left.id}",
    )  # fmt: skip
    assert harness.calls == []  # landed as verified: same commit, same diff
    attempts = memory.attempts_for(incident.id)
    assert [(a.outcome, a.landed_branch) for a in attempts] == [("verified", incident.branch)]
    assert RIGHT in git(repo, "show", f"{incident.branch}:{JOB}")
    assert git(repo, "rev-parse", f"{incident.branch}~1") == event.commit
    assert "verified" in Path(incident.report_md or "").read_text()
    assert user_tree(repo) == before
    assert stray(_patchit_home, repo) == NOTHING


def test_a_verified_but_unlanded_diff_on_a_new_commit_is_verified_again_not_refused(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    import patchit.loop.landing

    def first_run() -> None:
        patchit.loop.landing.create_branch = die  # type: ignore[assignment]
        heal_in_child(_patchit_home, event, FakeHarness.passing_when(JOB, RIGHT))

    assert killed(first_run) == KILLED
    repo = Path(event.repo_path or "")
    (repo / "README").write_text("more work\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "docs")
    newer = event.model_copy(update={"event_id": "newer", "commit": git(repo, "rev-parse", "HEAD")})
    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), newer)
    assert outcome.incident.status == "fixed" and len(harness.calls) == 1
    outcomes = [a.outcome for a in memory.attempts_for(outcome.incident.id)]
    assert outcomes == ["verified", "verified"]  # not "refused: repeated diff"


def killed_mid_verification(home: Path, event: UniversalFailureEvent) -> None:
    def handler(_ws: Workspace, _ev: UniversalFailureEvent) -> bool:
        die()

    assert killed(lambda: heal_in_child(home, event, FakeHarness(handler))) == KILLED


def test_the_next_run_of_any_incident_clears_what_a_killed_run_left(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, tmp_path: Path
) -> None:
    repo = Path(event.repo_path or "")
    killed_mid_verification(_patchit_home, event)
    [left] = memory.list_incidents()
    assert left.status == "open" and memory.has_lease(left.id)
    assert stray(_patchit_home, repo) == {
        "worktrees": [f"{left.id}-candidate"], "sandboxes": [left.id], "registered": ["1"],
    }  # fmt: skip

    # another incident's heal, in another repository, starts by clearing it
    other_repo = init_repo(tmp_path / "other")
    other = script_failure(other_repo, "jobs/sum.py", SOURCE.replace("rows", "items"), "sum")
    owner = claim_owner()
    sweep = sweep_dead_runs(_patchit_home, memory, owner)
    assert (sweep.worktrees, sweep.sandboxes, sweep.leases) == (1, 1, 1)
    assert sweep.resumable == [left.id]
    assert stray(_patchit_home, repo) == NOTHING
    assert not memory.lease_is_live(left.id)
    assert memory.get_incident(left.id).status == "open"  # left for the next worker or heal
    outcome = run(
        make_ctx(_patchit_home, memory, [Scripted()], [FakeHarness()]), other
    )  # and the run goes on with its own incident
    assert outcome.incident.id != left.id


def test_a_live_runs_worktree_and_lease_are_never_swept(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    seen: list[dict[str, list[str]]] = []

    def handler(_ws: Workspace, _ev: UniversalFailureEvent) -> bool:
        # a second run starts while this one verifies: it must leave all of it alone
        with Memory.open(_patchit_home) as other:
            sweep = sweep_dead_runs(_patchit_home, other, "elsewhere:1:1")
            seen.append(stray(_patchit_home, repo))
            assert (sweep.worktrees, sweep.sandboxes, sweep.leases) == (0, 0, 0)
        return True

    harness = FakeHarness(handler)
    outcome = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    assert outcome.incident.status == "fixed"
    assert seen and seen[0]["worktrees"] == [f"{outcome.incident.id}-candidate"]


def fake_context(home: Path, repo: Path | None, **kw: Any) -> Context:
    return make_ctx(
        home, kw["memory"], [Scripted([edit(RIGHT)])], [FakeHarness.passing_when(JOB, RIGHT)]
    )


def test_the_next_worker_resumes_an_incident_whose_run_was_killed(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    killed_mid_verification(_patchit_home, event)
    [left] = memory.list_incidents()
    lines: list[str] = []
    stats = Worker(_patchit_home, say=lines.append, make_context=fake_context).run(once=True)
    assert stats.resumed == 1
    incident = memory.get_incident(left.id)
    assert (incident.status, incident.branch) == ("fixed", f"patchit/{left.id}")
    assert stray(_patchit_home, repo) == NOTHING
    assert not memory.has_lease(left.id)
    assert any("resuming" in line for line in lines), lines


def test_heal_id_resumes_a_killed_incident(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    import patchit.loop.landing

    def first_run() -> None:
        patchit.loop.landing.create_branch = die  # type: ignore[assignment]
        heal_in_child(_patchit_home, event, FakeHarness.passing_when(JOB, RIGHT))

    assert killed(first_run) == KILLED
    [left] = memory.list_incidents()
    # no harness needed: the verified fix lands as it is (the real plugins are never run)
    result = CliRunner().invoke(cli, ["heal", left.id])
    assert result.exit_code == 0, result.output
    assert memory.get_incident(left.id).status == "fixed"
    assert stray(_patchit_home, Path(event.repo_path or "")) == NOTHING


def test_heal_id_never_downgrades_a_fixed_incident(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness.passing_when(JOB, RIGHT)
    fixed = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    assert fixed.incident.status == "fixed"
    result = CliRunner().invoke(cli, ["heal", fixed.incident.id])
    assert result.exit_code == 0, result.output
    assert "already fixed" in result.output and f"patchit/{fixed.incident.id}" in result.output
    again = memory.get_incident(fixed.incident.id)
    assert (again.status, again.branch) == ("fixed", fixed.incident.branch)


def test_a_spooled_event_whose_worker_was_killed_is_healed_by_the_next_worker(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    with Spool.open(_patchit_home) as spool:
        spool.put(event.model_dump(mode="json"))

    def dying_worker() -> None:
        def dying(home: Path, repo: Path | None, **kw: Any) -> Context:
            return make_ctx(home, kw["memory"], [Scripted([edit(RIGHT)])], [FakeHarness(die)])

        Worker(_patchit_home, make_context=dying).run(once=True)

    assert killed(dying_worker) == KILLED
    with Spool.open(_patchit_home) as spool:
        assert spool.counts() == {"taken": 1}
    stats = Worker(_patchit_home, make_context=fake_context).run(once=True)
    assert stats.bad == 0
    [incident] = memory.list_incidents()
    assert incident.status == "fixed"
    with Spool.open(_patchit_home) as spool:
        assert spool.counts() == {"done": 1}


@pytest.mark.parametrize("at", CHECKPOINTS)
def test_a_sigkill_at_each_checkpoint_loses_nothing(
    at: str,
    event: UniversalFailureEvent,
    memory: Memory,
    _patchit_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = Path(event.repo_path or "")
    before = user_tree(repo)

    def first_run() -> None:
        os.environ[FAULT_ENV] = at
        heal_in_child(_patchit_home, event, FakeHarness.passing_when(JOB, RIGHT))

    assert killed(first_run) == -signal.SIGKILL
    [left] = memory.list_incidents()
    assert left.status == "open"
    lines: list[str] = []
    stats = Worker(_patchit_home, say=lines.append, make_context=fake_context).run(once=True)
    assert stats.resumed == 1, lines
    incident = memory.get_incident(left.id)
    assert (incident.status, incident.branch) == ("fixed", f"patchit/{left.id}")
    assert RIGHT in git(repo, "show", f"{incident.branch}:{JOB}")
    # one verified attempt: a fix recorded before the kill landed without a new verification
    verified = [a for a in memory.attempts_for(left.id) if a.outcome == "verified"]
    assert len(verified) == 1 and verified[0].landed_branch == incident.branch
    assert Path(incident.report_md or "").is_file()
    assert stray(_patchit_home, repo) == NOTHING and not memory.has_lease(left.id)
    assert user_tree(repo) == before


def test_a_landed_fix_whose_branch_is_gone_is_not_landed_again_unverified(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness.passing_when(JOB, RIGHT)
    first = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    repo = Path(event.repo_path or "")
    git(repo, "branch", "-D", f"patchit/{first.incident.id}")  # the user threw it away
    memory.transition(first.incident.id, "reopened", branch=None)
    again = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), event)
    assert again.incident.status == "failed" and again.incident.branch is None
    assert git(repo, "branch", "--list", "patchit/*") == ""


def worker_killed_at_checkpoint(home: Path, at: str) -> None:
    """A worker run (in a forked child) that SIGKILLs itself at checkpoint `at`."""

    def run() -> None:
        os.environ[FAULT_ENV] = at
        Worker(home, make_context=fake_context).run(once=True)

    assert killed(run) == -signal.SIGKILL


def test_an_incident_whose_heal_kills_the_worker_twice_is_failed_and_never_resumed(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    with Spool.open(_patchit_home) as spool:
        spool.put(event.model_dump(mode="json"))
    worker_killed_at_checkpoint(_patchit_home, "claimed")  # healing the spooled event
    worker_killed_at_checkpoint(_patchit_home, "claimed")  # resuming it
    [left] = memory.list_incidents()
    assert left.status == "open"
    lines: list[str] = []
    stats = Worker(_patchit_home, say=lines.append, make_context=fake_context).run(once=True)
    assert stats.resumed == 0 and stats.bad == 0
    incident = memory.get_incident(left.id)
    assert (incident.status, incident.branch) == ("failed", None)
    report = Path(incident.report_md or "").read_text()
    assert "stopped the process healing it 2 times" in report
    assert "no attempt was recorded" in report and f"patchit heal {left.id}" in report
    assert any("not resumed again" in line for line in lines), lines
    with Spool.open(_patchit_home) as spool:
        assert spool.counts() == {"done": 1}  # its event was attached, not healed again
    again = Worker(_patchit_home, make_context=fake_context).run(once=True)
    assert again.resumed == 0 and memory.get_incident(left.id).status == "failed"
    assert not memory.has_lease(left.id)
    assert stray(_patchit_home, Path(event.repo_path or "")) == NOTHING


def test_max_crashes_is_the_operators_setting(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    (_patchit_home / "patchit.toml").write_text("[worker]\nmax_crashes = 3\n")
    killed_mid_verification(_patchit_home, event)
    worker_killed_at_checkpoint(_patchit_home, "before-record")  # the resume dies too
    [left] = memory.list_incidents()
    stats = Worker(_patchit_home, make_context=fake_context).run(once=True)
    assert stats.resumed == 1  # two crashes of three allowed: resumed once more
    assert memory.get_incident(left.id).status == "fixed"
    assert not memory.has_lease(left.id)


def test_each_dead_run_is_counted_once_however_often_it_is_swept(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    killed_mid_verification(_patchit_home, event)
    [left] = memory.list_incidents()
    owner = claim_owner()
    for _ in range(3):  # swept by run after run that do not resume it (another host's, say)
        assert sweep_dead_runs(_patchit_home, memory, owner).resumable == [left.id]
    assert memory.crashes_of(left.id) == 1
    outcome = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])],
                           [FakeHarness.passing_when(JOB, RIGHT)]), event)  # fmt: skip
    assert outcome.incident.status == "fixed"
    assert memory.crashes_of(left.id) == 0  # a run that finished: the count went with its lease

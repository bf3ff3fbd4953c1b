"""Approval modes after a real heal (FakeHarness, real git, a bare remote and a local server
speaking GitHub's pulls API), and a human's approve / reject."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.config import PatchitConfig
from patchit.delivery.approval import approve, reject
from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.loop.context import Context
from patchit.memory import Memory
from tests.conftest import git
from tests.delivery.github_server import FakeGitHub, serve
from tests.test_loop_fast import JOB, RIGHT, Scripted, edit, run

TOKEN = "ghp_" + "m" * 36


@pytest.fixture
def github(
    event: UniversalFailureEvent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeGitHub]:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(Path(event.repo_path or ""), "remote", "add", "origin", str(remote))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    with serve(FakeGitHub("acme/jobs", remote, TOKEN)) as server:
        yield server


def heal_with(
    event: UniversalFailureEvent, memory: Memory, home: Path, github: FakeGitHub, said: list[str],
    **delivery: Any,
) -> str:  # fmt: skip
    config = PatchitConfig.model_validate({"delivery": {
        "provider": "github", "repo": "acme/jobs", "api_url": github.url, "base": "main",
        **delivery}})  # fmt: skip
    strategy = Scripted([edit('row["amt"]', "wrong_key"), edit(RIGHT, "rename_key")])
    ctx = Context(home, memory, config, [strategy], [FakeHarness.passing_when(JOB, RIGHT)],
                  say=said.append)  # fmt: skip
    outcome = run(ctx, event)
    assert outcome.incident.status == "fixed", "\n".join(said)
    return outcome.incident.id


def test_autonomous_opens_the_pull_request_after_verification(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    said: list[str] = []
    incident_id = heal_with(event, memory, _patchit_home, github, said, mode="autonomous")
    assert len(github.pulls) == 1 and github.pulls[1]["head"]["ref"] == f"patchit/{incident_id}"
    assert memory.get_incident(incident_id).pr_state == "open"
    assert any("pull request #1 opened" in s for s in said)


def test_supervised_opens_nothing(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    heal_with(event, memory, _patchit_home, github, [])
    assert github.requests == [] and github.pulls == {}


def test_threshold_waits_below_min_confidence(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    said: list[str] = []
    heal_with(event, memory, _patchit_home, github, said, mode="threshold", min_confidence=0.9)
    assert github.requests == []
    assert any("waits for a human: confidence 0.32 < 0.9" in s for s in said), said


def test_threshold_waits_for_a_critical_path(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    said: list[str] = []
    heal_with(event, memory, _patchit_home, github, said, mode="threshold", min_confidence=0.3,
              critical_paths=["dags/*"])  # fmt: skip
    assert github.requests == []
    assert any(f"touches a critical path ({JOB})" in s for s in said), said


def test_threshold_delivers_above_min_confidence(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    heal_with(event, memory, _patchit_home, github, [], mode="threshold", min_confidence=0.3)
    assert len(github.pulls) == 1


def test_a_failed_delivery_keeps_the_verified_branch(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_bad")
    said: list[str] = []
    incident_id = heal_with(event, memory, _patchit_home, github, said, mode="autonomous")
    incident = memory.get_incident(incident_id)
    assert incident.status == "fixed" and incident.branch and incident.pr_url is None
    assert any("pull request not opened" in s and "401" in s for s in said), said


def test_reject_feeds_memory_and_the_retry_uses_another_fix(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    incident_id = heal_with(event, memory, _patchit_home, github, [])
    with pytest.raises(BadInputError, match="--why is required"):
        reject(incident_id, memory, " ")
    rejected = reject(incident_id, memory, "amount is in cents here")
    assert (rejected.status, rejected.branch, rejected.needs_human) == ("failed", None, True)
    assert memory.reviews_for(incident_id)[0].decision == "rejected"
    repo = Path(event.repo_path or "")
    assert RIGHT in git(repo, "show", f"patchit/{incident_id}-rejected:{JOB}")
    with pytest.raises(BadInputError, match="only a verified fix"):
        approve(incident_id, memory)
    other = 'row["amount"] * 1'
    memory.transition(incident_id, "retry")  # what `patchit heal ID` does
    ctx = Context(_patchit_home, memory, PatchitConfig(),
                  [Scripted([edit(RIGHT, "rename_key"), edit(other, "scale")])],
                  [FakeHarness.passing_when(JOB, RIGHT)])  # fmt: skip
    again = run(ctx, event)
    outcomes = [(a.tag, a.outcome) for a in memory.attempts_for(again.incident.id)]
    assert ("rename_key", "refused") in outcomes[-2:]  # the rejected diff is not tried again
    assert outcomes[-1] == ("scale", "verified")
    assert again.incident.status == "fixed"


def test_approve_records_the_decision(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, github: FakeGitHub
) -> None:
    incident_id = heal_with(event, memory, _patchit_home, github, [])
    approve(incident_id, memory, "looks right")
    (review,) = memory.reviews_for(incident_id)
    assert (review.decision, review.why) == ("approved", "looks right") and review.who

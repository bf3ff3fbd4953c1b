"""The failure as it stands now, and whether it is the same one.

An incident collects the failures of one cause. Two things make a later failure something else:
the repository moved on (`at_head`: a retry heals the failure on today's HEAD, and first checks
that it still fails there, `no_longer_fails`), and the class changed (`new_cause`: the same test
failing again at a new commit because of a code change, where the incident was about bad
data). A recurrence of a fixed incident names its fix branch only where the repository holds it
on top of one of the incident's commits (`branch_here`): a repository re-created at the same
path does not. Nothing here changes an incident; the loop acts on the answers.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from patchit.errors import VcsError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.loop.trial import Bench
from patchit.memory import Incident, IncidentStatus, Memory
from patchit.sandbox.git import head_commit, is_ancestor, run_git
from patchit.sandbox.worktree import create_worktree, remove_worktree

REANCHORED = "reanchored_from"  # an event's context key: the commit it was first seen at


def at_head(event: UniversalFailureEvent, repo: Path) -> UniversalFailureEvent:
    """The failure as it stands now: when the repository moved on from the event's commit, a
    fresh event on HEAD (the old one stays in the incident's timeline), which the loop first
    reproduces. The same event when HEAD is its commit (or it has none)."""
    if event.commit is None:
        return event
    try:
        head = head_commit(repo)
    except VcsError:
        return event
    if head == event.commit:
        return event
    return event.model_copy(
        update={
            "event_id": uuid.uuid4().hex,
            "commit": head,
            "created_utc": datetime.now(UTC),
            "context": {**event.context, REANCHORED: event.commit},
        }
    )


def no_longer_fails(bench: Bench) -> str | None:
    """For an event moved to today's commit (`at_head`): run the unit unchanged there. Why the
    heal stops when it passes (nothing to fix: every candidate would pass too), else None."""
    old = bench.event.context.get(REANCHORED)
    if not old or bench.event.commit is None:
        return None
    commit = bench.event.commit
    dest = bench.ctx.home / "worktrees" / f"{bench.incident_id}-reproduce"
    worktree = create_worktree(bench.repo, commit, dest)
    try:
        scratch = bench.sandbox / "reproduce"
        scratch.mkdir(parents=True, exist_ok=True)
        workspace = Workspace(root=worktree, scratch=scratch, snapshot=bench.snapshot_dir)
        bench.ctx.say(f"reproducing the failure at {commit[:12]} (it was seen at {old[:12]})")
        result = bench.harness.verify(workspace, bench.event)
    finally:
        remove_worktree(bench.repo, worktree)
    if not result.passed:
        return None
    return (
        f"the failure no longer reproduces at {commit[:12]} ({result.command} passes there; "
        f"it was seen at {str(old)[:12]}): nothing to heal"
    )


def needs_recheck(incident: Incident, event: UniversalFailureEvent, memory: Memory) -> bool:
    """A recurrence that may have another cause: its incident ended without a fix (escalated
    or failed) with a class, and the failure comes from a commit none of its events came from.
    The loop classifies it, and `new_cause` says whether it belongs elsewhere."""
    if incident.status not in (IncidentStatus.ESCALATED, IncidentStatus.FAILED):
        return False
    if not incident.classification or event.commit is None:
        return False
    return not memory.has_event_from(incident.id, event.commit, besides=event.event_id)


def new_cause(incident: Incident, cls: str) -> bool:
    """The recurrence's class (`cls`, from the rules) is not the incident's."""
    return bool(incident.classification) and cls != incident.classification


def branch_here(incident: Incident, repo: Path, memory: Memory) -> Incident:
    """`incident` as a recurrence in `repo` may show it: with its fix branch only when `repo`
    has that branch and it grew from a commit the incident's failures came from (a repository
    re-created at the same path, or one whose branch was deleted, has no such branch)."""
    if not incident.branch:
        return incident
    try:
        ref = f"refs/heads/{incident.branch}^{{commit}}"
        tip = run_git(repo, "rev-parse", "--verify", "--quiet", ref).strip()
    except VcsError:
        tip = ""
    commits = memory.event_commits(incident.id)
    if tip and (not commits or any(is_ancestor(repo, c, tip) for c in commits)):
        return incident
    return incident.model_copy(update={"branch": None})

"""Landing the winner: its commit on `patchit/<id>`, made from a fresh worktree, and the
fix an earlier, killed run verified (`recorded_winner`), landed without verifying again.

A verified attempt is recorded with its candidate, verification and data check before it
lands, and marked landed once its branch exists: a run killed in between leaves the next run
what it needs to land the fix instead of trying it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from patchit.fidelity import DataCheck
from patchit.harnesses.base import Verification
from patchit.loop.faults import checkpoint
from patchit.loop.trial import Bench, Trial, event_redactor
from patchit.memory.records import AttemptRecord
from patchit.patching.apply import apply_edits
from patchit.patching.base import PatchCandidate
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.sync.branch import (
    branch_name,
    commit_patch,
    create_branch,
    inspect_commands,
    landed_commit,
)


@dataclass(frozen=True)
class Landing:
    """Where the verified fix landed and how to look at it."""

    branch: str
    commands: list[str]


def recorded_winner(bench: Bench) -> Trial | None:
    """A fix an earlier run of this incident verified but was killed before finishing: the one
    already on its branch, else the smallest verified at this same failing commit (it lands
    without a new verification: same commit, same diff). None when there is none."""
    found: list[tuple[AttemptRecord, Trial]] = []
    for attempt in bench.ctx.memory.verified_for(bench.incident_id):
        same_commit = attempt.commit is not None and attempt.commit == bench.event.commit
        if attempt.landed_branch is None and not same_commit:
            continue  # verified on another commit: the search verifies it again
        if attempt.landed_branch and landed_commit(bench.repo, bench.incident_id) is None:
            continue  # its branch is gone (deleted, or the fix regressed): not resumed
        try:
            data = json.loads(attempt.verified_json or "")
            trial = Trial(
                candidate=PatchCandidate.model_validate(data["candidate"]),
                diff=attempt.diff,
                result=Verification.model_validate(data["result"]),
                data=DataCheck.model_validate(data["data"]) if data.get("data") else None,
                attempt_id=attempt.id,
            )
        except (ValueError, KeyError, TypeError):
            continue  # unreadable: the search tries again
        found.append((attempt, trial))
    if not found:
        return None
    landed = [t for a, t in found if a.landed_branch]
    if landed:
        return landed[0]
    return min((t for _, t in found), key=lambda t: (t.diff.count("\n"), len(t.diff)))


def land(bench: Bench, trial: Trial) -> Landing:
    """Commit the winner on `patchit/<id>` from a fresh worktree (nothing left holding it).

    A branch a killed run already made for this incident, on the failing commit, is kept."""
    repo, memory = bench.repo, bench.ctx.memory
    sha = landed_commit(repo, bench.incident_id)
    if sha is None:
        workdir = bench.ctx.home / "worktrees" / f"{bench.incident_id}-land"
        worktree = create_worktree(repo, bench.event.commit or "HEAD", workdir)
        try:
            files = apply_edits(worktree, trial.candidate.edits)
            sha = commit_patch(worktree, files, _commit_message(bench, trial))
            checkpoint("committed")
        finally:
            remove_worktree(repo, worktree)
        branch = create_branch(repo, bench.incident_id, sha)
    else:
        branch = branch_name(bench.incident_id)
        bench.ctx.say(f"branch {branch} was made by a run that was stopped: keeping it")
    checkpoint("branched")
    if trial.attempt_id is not None:
        memory.mark_landed(trial.attempt_id, branch)
    return Landing(branch, inspect_commands(repo, branch, bench.event))


def _commit_message(bench: Bench, trial: Trial) -> str:
    """The branch's commit message: written into the user's repository, so redacted."""
    candidate = trial.candidate
    data = f"Data check: {trial.data.summary}\n" if trial.data is not None else ""
    return event_redactor(bench.event).redact(
        f"patchit: {candidate.rationale}\n\n"
        f"Incident: {bench.incident_id}\n"
        f"Failing unit: {bench.event.unit_id}\n"
        f"Strategy: {candidate.strategy} ({candidate.tag}, tier {candidate.tier})\n"
        f"Verified by re-running the unit and its downstream in a sandbox.\n{data}"
    )

"""Deliver a verified patch: one commit on `patchit/<incident>` in the user's repository.

The commit is made in the candidate's worktree (detached at the failing commit), so the user's
checked-out branch, index and working tree never change; the worktree is removed afterwards so
`git checkout patchit/<id>` works at once.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from patchit.errors import VcsError
from patchit.events.model import UniversalFailureEvent
from patchit.intake.worktree_snapshot import snapshot_of
from patchit.sandbox.git import run_git

AUTHOR_NAME = "patchit"
AUTHOR_EMAIL = "patchit@localhost"


def branch_name(incident_id: str) -> str:
    return f"patchit/{incident_id}"


def commit_patch(worktree: Path, files: list[str], message: str) -> str:
    """Commit exactly `files` in the worktree with patchit's identity; return the sha."""
    if not files:
        raise VcsError("nothing to commit: the verified patch touches no files")
    run_git(worktree, "add", "--", *files)
    identity = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}>"
    run_git(
        worktree,
        "-c",
        f"user.name={AUTHOR_NAME}",
        "-c",
        f"user.email={AUTHOR_EMAIL}",
        "commit",
        "--no-verify",
        "-q",
        f"--author={identity}",
        "-m",
        message,
        "--",
        *files,
    )
    return run_git(worktree, "rev-parse", "HEAD").strip()


def create_branch(repo: Path, incident_id: str, sha: str) -> str:
    """Point `patchit/<id>` at the verified commit; refuse to move an existing branch."""
    name = branch_name(incident_id)
    exists = run_git(repo, "branch", "--list", name)
    if exists.strip():
        raise VcsError(f"branch {name} already exists in {repo}; delete it or heal again")
    run_git(repo, "branch", name, sha)
    return name


def landed_commit(repo: Path, incident_id: str) -> str | None:
    """The commit of `patchit/<id>` when patchit already made it for this incident (a run that
    was stopped after branching), else None."""
    name = branch_name(incident_id)
    sha = run_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}", check=False)
    sha = sha.strip()
    if not sha:
        return None
    log = run_git(repo, "log", "-1", "--format=%ae%n%B", sha, check=False)
    email, _, body = log.partition("\n")
    if email.strip() != AUTHOR_EMAIL or f"Incident: {incident_id}" not in body:
        return None
    return sha


def inspect_commands(repo: Path, branch: str, event: UniversalFailureEvent) -> list[str]:
    """What the engineer types to look at the fix and re-run it, without leaving their branch:
    `patchit inspect` checks it out in a worktree of its own and re-runs the failed unit there
    on a fresh copy of the warehouse. A fix of uncommitted work comes first as `patchit apply`,
    which puts it into the working tree it was made from."""
    incident_id = branch.removeprefix("patchit/")
    show = [f"git -C {shlex.quote(str(repo))} show {branch}", f"patchit inspect {incident_id}"]
    if snapshot_of(event) is not None:  # uncommitted work: the fix goes into the working tree
        return [f"patchit apply {incident_id}", *show]
    return show  # the same two commands for every runtime

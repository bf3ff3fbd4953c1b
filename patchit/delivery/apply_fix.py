"""`patchit apply ID`: a verified fix, put into the working tree it was made for.

A fix of uncommitted work (`patchit.intake.worktree_snapshot`) cannot be merged: it sits on a
branch whose parent is a snapshot of the developer's tree, not on anything they committed. So
the fix is also a patch: the branch's one commit against its parent, applied to the working
tree by `git apply` (the index is not touched; the developer stages what they keep). The same
works for a fix of committed code: its parent is the failing commit.

A patch is only as good as the text it was made against. Before anything is written, every
file the fix touches must be in the working tree exactly as it was in that parent (a file the
fix adds must not exist yet); otherwise the developer has edited it since and the patch would
be applied to code nobody verified: the command refuses, names the files, and writes nothing.
`git apply` itself is all or nothing.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from patchit.errors import BadInputError, VcsError
from patchit.memory import Incident, Memory
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git


@dataclass(frozen=True)
class Fix:
    """A fix as a patch: the branch's commit (`tip`) against its parent (`base`)."""

    incident_id: str
    repo: Path
    branch: str
    base: str
    tip: str
    files: tuple[str, ...]

    def patch(self) -> str:
        """The fix as a patch `git apply` takes (binary-safe)."""
        return run_git(self.repo, "diff", "--binary", "--no-renames", "--no-color",
                       "--no-ext-diff", self.base, self.tip)  # fmt: skip


def fix_of(incident: Incident, memory: Memory) -> Fix:
    """The incident's fix as a patch; BadInputError when it has none in its repository."""
    if incident.status != "fixed" or not incident.branch:
        raise BadInputError(
            f"incident {incident.id} is {incident.status}: it has no verified fix to apply "
            f"(see `patchit report {incident.id}`)"
        )
    repo_path = incident.repo_path
    if repo_path is None:
        latest = memory.latest_event(incident.id)
        repo_path = latest.repo_path if latest else None
    repo = Path(repo_path or ".")
    ref = f"refs/heads/{incident.branch}"
    tip = run_git(repo, "rev-parse", "--verify", "--quiet", ref, check=False,
                  timeout_s=QUERY_TIMEOUT_S).strip()  # fmt: skip
    if not tip:
        raise BadInputError(
            f"incident {incident.id}: its branch {incident.branch} is not in {repo} (deleted, "
            f"or the repository moved); heal the failure again"
        )
    base = run_git(repo, "rev-parse", f"{tip}~1", timeout_s=QUERY_TIMEOUT_S).strip()
    names = run_git(repo, "diff", "--name-only", "--no-renames", "-z", base, tip,
                    timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    files = tuple(sorted(n for n in names.split("\0") if n))
    return Fix(incident.id, repo.resolve(), incident.branch, base, tip, files)


def changed_since(fix: Fix) -> list[str]:
    """The files the fix touches whose working-tree text is not the one the fix was made
    against (edited, deleted, or, for a file the fix adds, already there)."""
    at_base = _blobs(fix.repo, fix.base, fix.files)
    present = [f for f in fix.files if (fix.repo / f).is_file() or (fix.repo / f).is_symlink()]
    in_tree = dict(zip(present, _hash_files(fix.repo, present), strict=True))
    return [f for f in fix.files if at_base.get(f) != in_tree.get(f)]


def apply_fix(fix: Fix) -> list[str]:
    """Apply the fix to the working tree (never the index); the files it changed. Refuses
    (BadInputError, nothing written) when a file it touches changed since."""
    if stale := changed_since(fix):
        shown = ", ".join(stale[:5]) + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
        raise BadInputError(
            f"patchit apply {fix.incident_id}: {shown} changed since the fix was made on "
            f"{fix.base[:12]}; nothing was written. Heal the current failure again, or merge "
            f"by hand from `git -C {fix.repo} diff {fix.base[:12]} {fix.branch}`"
        )
    with tempfile.TemporaryDirectory(prefix="patchit-apply-") as scratch:
        patch = Path(scratch) / f"{fix.incident_id}.patch"
        patch.write_text(fix.patch(), encoding="utf-8")
        try:
            run_git(fix.repo, "apply", "--check", str(patch))
            run_git(fix.repo, "apply", str(patch))
        except VcsError as exc:  # all or nothing: git wrote none of it
            raise BadInputError(
                f"patchit apply {fix.incident_id}: git could not apply the fix to {fix.repo} "
                f"({exc}); nothing was written"
            ) from exc
    return list(fix.files)


def _blobs(repo: Path, commit: str, files: tuple[str, ...]) -> dict[str, str]:
    """Each file's blob id at `commit` (absent when the file is not there)."""
    if not files:
        return {}
    out = run_git(repo, "ls-tree", "-z", "--full-tree", commit, "--", *files,
                  timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    found = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            found[path] = meta.split()[2]
    return found


def _hash_files(repo: Path, files: list[str]) -> list[str]:
    """The blob id each working-tree file would have (git's filters applied, nothing written)."""
    if not files:
        return []
    out = run_git(repo, "hash-object", "--", *files, timeout_s=QUERY_TIMEOUT_S)
    return out.split()

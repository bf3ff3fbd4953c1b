"""Which files of a candidate's worktree git knows to be as committed, by their blob ids.

Judging what a candidate changed (`changes.changed_node_names`) compares dbt's checksum of every
file the failing run parsed with the worktree's: on a 2,000-model project that is 2,100 files
read and hashed per candidate, for the one or two it wrote. A file git reports as unmodified
holds its blob's content, which is the same for every candidate of an incident (their
worktrees come from one commit), so its checksum is computed once per blob and remembered.
Git's own stat cache tells modified files apart (`git diff-files`; racily clean entries it
compares by content). When git cannot say (no repository, an error), nothing is known clean
and every file is hashed, as before.
"""

from __future__ import annotations

from pathlib import Path

from patchit.errors import VcsError
from patchit.sandbox.git import run_git

_TIMEOUT_S = 30.0


def clean_blobs(project_dir: Path) -> dict[str, str]:
    """Project-relative path -> a key for its content (the repository and blob id), for each
    tracked file under `project_dir` that the worktree has not modified; {} when git cannot
    say."""
    try:
        common = run_git(project_dir, "rev-parse", "--git-common-dir", timeout_s=_TIMEOUT_S)
        staged = run_git(project_dir, "ls-files", "-s", "-z", timeout_s=_TIMEOUT_S)
        modified = run_git(
            project_dir, "diff-files", "--name-only", "--relative", "-z", timeout_s=_TIMEOUT_S
        )
    except (VcsError, OSError):
        return {}
    repo = str((project_dir / common.strip()).resolve())
    changed = set(modified.split("\0"))
    found: dict[str, str] = {}
    for entry in staged.split("\0"):
        meta, _, rel = entry.partition("\t")
        parts = meta.split()
        # mode blob stage: only a merged regular file's blob is its content
        if len(parts) != 3 or parts[2] != "0" or not parts[0].startswith("100") or rel in changed:
            continue
        found[rel] = f"{repo}:{parts[1]}"
    return found

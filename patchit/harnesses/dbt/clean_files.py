"""Which files of a candidate's worktree git knows to be as committed, by their blob ids.

Judging what a candidate changed (`changes.changed_node_names`) compares dbt's checksum of every
file the failing run parsed with the worktree's: on a 2,000-model project that is 2,100 files
read and hashed per candidate, for the one or two it wrote. A file git reports as unmodified
holds its blob's content, which is the same for every candidate of an incident (their
worktrees come from one commit), so its checksum is computed once per blob and remembered.
Git tells modified files apart (`git ls-files --modified`: by its stat cache, and by content
where the stat moved or is racy). When git cannot say (no repository, an error), nothing is
known clean and every file is hashed, as before.
"""

from __future__ import annotations

import os
from pathlib import Path

from patchit.errors import VcsError
from patchit.sandbox.git import run_git

_TIMEOUT_S = 30.0


def clean_blobs(project_dir: Path) -> dict[str, str]:
    """Project-relative path -> a key for its content (the repository and blob id), for each
    tracked file under `project_dir` that the worktree has not modified; {} when git cannot
    say."""
    try:
        # one git: the index's entries ("H"; "S" skip-worktree) and the modified ones ("C",
        # deleted files too); a file whose stat moved but whose content did not is not "C"
        listed = run_git(project_dir, "ls-files", "-c", "-m", "-s", "-t", "-z",
                         timeout_s=_TIMEOUT_S)  # fmt: skip
        common = _common_dir(project_dir)
        if common is None:
            asked = run_git(project_dir, "rev-parse", "--git-common-dir", timeout_s=_TIMEOUT_S)
            common = (project_dir / asked.strip()).resolve()
    except (VcsError, OSError):
        return {}
    repo = str(common)
    entries = [entry.split("\t", 1) for entry in listed.split("\0") if "\t" in entry]
    changed = {rel for meta, rel in entries if meta.startswith("C ")}
    found: dict[str, str] = {}
    for meta, rel in entries:
        parts = meta.split()
        # tag mode blob stage: only a merged regular file's blob is its content
        if (
            len(parts) != 4 or parts[0] not in ("H", "S") or parts[3] != "0"
            or not parts[1].startswith("100") or rel in changed
        ):  # fmt: skip
            continue
        found[rel] = f"{repo}:{parts[2]}"
    return found


def _common_dir(start: Path) -> Path | None:
    """The repository's common git directory, as `git rev-parse --git-common-dir` finds it,
    read from the files git reads (the nearest `.git`: a directory, or a worktree's file naming
    its git directory, whose `commondir` names the common one); None for anything else (a
    `GIT_COMMON_DIR` in the environment, a `.git` that is neither): git is asked then."""
    if "GIT_COMMON_DIR" in os.environ:
        return None
    try:
        here = start.resolve()
        for folder in (here, *here.parents):
            dot_git = folder / ".git"
            if dot_git.is_dir():
                return None if (dot_git / "commondir").exists() else dot_git
            if dot_git.exists():
                return _named_by(folder, dot_git.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    return None


def _named_by(folder: Path, text: str) -> Path | None:
    """The common git directory a worktree's (or submodule's) `.git` file leads to."""
    if not text.startswith("gitdir: ") or text.count("\n") > 1:
        return None
    git_dir = (folder / text[len("gitdir: ") :].strip()).resolve()
    common = git_dir / "commondir"
    if not common.is_file():
        return git_dir if (git_dir / "HEAD").is_file() else None
    return (git_dir / common.read_text(encoding="utf-8").strip()).resolve()

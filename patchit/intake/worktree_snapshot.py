"""Uncommitted work as a commit: what `patchit dbt` heals in the edit-build loop.

A developer edits a model and runs `patchit dbt -- build` before committing. The breaking
change is then the working tree against HEAD, and the loop needs it as a commit: a worktree to
verify in, a diff to read intents from, a parent for the fix branch. This module makes that
commit, the *snapshot*, without changing anything the user sees:

- a scratch index (`GIT_INDEX_FILE` in a temporary directory outside the repository) is read
  from HEAD, the changed paths are added to it from the working tree (`update-index --add
  --remove`: a deleted file is dropped, a new one added), and `write-tree` + `commit-tree`
  make a commit whose only parent is HEAD. The user's `.git/index`, working tree, stash list,
  HEAD and branches are untouched; git only gains objects. (`git stash create` would leave the
  same things alone, but it takes no untracked file, and its two-parent commit is the index
  and the tree mixed.)
- the paths: tracked files under the dbt project with changes, staged or not (both sides of a
  rename), and the untracked, not ignored files there that dbt reads (its resource paths, and
  its own YAML at the project's root). Never `profiles.yml`, even tracked and changed, or
  anything else: credentials and scratch files are not written into the repository's objects.
- the snapshot is dated as HEAD and signed by patchit, so the same work on the same HEAD is
  the same commit: a re-run of a failure already healed finds its incident again.

The snapshot rides on each failure's event (`context["uncommitted"]`: the snapshot, its base,
the files), where the reports, the fix's delivery and `patchit apply` read it back.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from patchit.errors import VcsError
from patchit.sandbox.git import QUERY_TIMEOUT_S, porcelain_entries, run_git

if TYPE_CHECKING:
    from patchit.events.model import UniversalFailureEvent

CONTEXT_KEY = "uncommitted"
AUTHOR = ("patchit", "patchit@localhost")
SUBJECT = "patchit: uncommitted work on"
# where dbt reads files from (dbt_project.yml keys and their defaults), and what it reads there
_RESOURCE_PATHS = (
    ("model-paths", "models"), ("seed-paths", "seeds"), ("snapshot-paths", "snapshots"),
    ("test-paths", "tests"), ("analysis-paths", "analyses"), ("macro-paths", "macros"),
)  # fmt: skip
_READ_SUFFIXES = (".sql", ".py", ".yml", ".yaml", ".csv", ".md", ".jinja", ".jinja2")
_PROJECT_FILES = ("dbt_project.yml", "packages.yml", "dependencies.yml", "selectors.yml")
# dbt's own output: never a change, and walking it would cost a large project seconds
_OUTPUT_DIRS = ("target", "logs", "dbt_packages", "dbt_modules")


@dataclass(frozen=True)
class UncommittedWork:
    """What differs from HEAD under a dbt project: tracked files with changes (staged or not)
    and untracked files dbt reads, relative to the repository root."""

    tracked: tuple[str, ...] = ()
    untracked: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.tracked or self.untracked)

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted({*self.tracked, *self.untracked}))


@dataclass(frozen=True)
class WorkSnapshot:
    """The uncommitted work as a commit on top of `base` (HEAD when it was taken)."""

    commit: str
    base: str
    files: tuple[str, ...]

    def as_context(self) -> dict[str, Any]:
        return {"snapshot": self.commit, "base": self.base, "files": list(self.files)}

    def describe(self) -> str:
        shown = ", ".join(self.files[:5]) + (
            f" and {len(self.files) - 5} more" if len(self.files) > 5 else ""
        )
        return f"uncommitted work on {self.base[:12]} ({shown}), snapshot {self.commit[:12]}"


_NEVER = frozenset({"profiles.yml", "profiles.yaml"})


def find_uncommitted(repo: Path, project: Path) -> UncommittedWork:
    """The project's uncommitted work in one `git status` (it writes no index: `run_git` sets
    GIT_OPTIONAL_LOCKS=0). `repo` is the repository's root."""
    rel = _relative(repo, project)
    spec = [rel or "."] + [f":(exclude){_join(rel, d)}" for d in _OUTPUT_DIRS]
    out = run_git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *spec,
                  timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    tracked: list[str] = []
    untracked: list[str] = []
    for status, name, source in porcelain_entries(out):
        if status == "??":
            untracked.append(name)
            continue
        tracked.append(name)
        if "R" in status and source:  # both sides of a rename: the old path goes too
            tracked.append(source)
    read = _read_by_dbt(repo, project, untracked) if untracked else []
    # a profile holds credentials: never written into the repository's objects, tracked or not
    # (the heal reads the user's own profile where dbt read it)
    kept = sorted({p for p in tracked if PurePosixPath(p).name not in _NEVER})
    return UncommittedWork(
        tuple(kept), tuple(p for p in read if PurePosixPath(p).name not in _NEVER)
    )


def take_snapshot(repo: Path, base: str, work: UncommittedWork) -> WorkSnapshot | None:
    """`work` on top of `base` as a commit (see the module docstring); None when its tree is
    `base`'s own (the changes were undone since). Raises VcsError when git cannot make it."""
    if not work:
        return None
    files = work.files
    with tempfile.TemporaryDirectory(prefix="patchit-snapshot-") as scratch:
        index = Path(scratch) / "index"
        run_git(repo, "read-tree", base, index_file=index)
        _add_paths(repo, files, index)
        tree = run_git(repo, "write-tree", index_file=index).strip()
    if tree == run_git(repo, "rev-parse", f"{base}^{{tree}}").strip():
        return None
    date = run_git(repo, "log", "-1", "--format=%cI", base).strip()
    name, email = AUTHOR
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date,
    }  # fmt: skip
    message = f"{SUBJECT} {base[:12]}\n\nFiles: {', '.join(files)}\n"
    commit = run_git(repo, "commit-tree", tree, "-p", base, "-m", message, env=env).strip()
    return WorkSnapshot(commit, base, files)


def snapshot_uncommitted(repo: Path, project: Path, base: str) -> WorkSnapshot | None:
    """The project's uncommitted work as a snapshot, or None when there is none."""
    return take_snapshot(repo, base, find_uncommitted(repo, project))


def is_snapshot(repo: Path, commit: str) -> bool:
    """Whether `commit` is a snapshot of uncommitted work this module made."""
    out = run_git(repo, "log", "-1", "--format=%ae%n%s", commit, check=False,
                  timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    email, _, subject = out.strip().partition("\n")
    return email == AUTHOR[1] and subject.startswith(SUBJECT)


def snapshot_of(event: UniversalFailureEvent) -> WorkSnapshot | None:
    """The snapshot an event failed on, when it failed on uncommitted work."""
    return snapshot_of_context(event.context.get(CONTEXT_KEY))


def snapshot_of_context(found: object) -> WorkSnapshot | None:
    """A snapshot from its `as_context()` form (None when it is not one)."""
    if not isinstance(found, dict):
        return None
    commit, base, files = found.get("snapshot"), found.get("base"), found.get("files")
    if not isinstance(commit, str) or not isinstance(base, str) or not isinstance(files, list):
        return None
    return WorkSnapshot(commit, base, tuple(str(f) for f in files))


def _add_paths(repo: Path, files: tuple[str, ...], index: Path) -> None:
    """Each path as it is in the working tree, in batches (a long list must not overflow the
    command line); a path that no longer exists is dropped from the index."""
    batch = 500
    for start in range(0, len(files), batch):
        chunk = files[start : start + batch]
        try:
            run_git(repo, "update-index", "--add", "--remove", "--", *chunk, index_file=index)
        except VcsError as exc:
            raise VcsError(f"could not snapshot the uncommitted work in {repo}: {exc}") from exc


def _read_by_dbt(repo: Path, project: Path, untracked: list[str]) -> list[str]:
    """The untracked files dbt reads: under its resource paths with a suffix it parses, or its
    own YAML at the project's root."""
    # yaml: only when there is an untracked file to judge
    from patchit.evidence.project_index import config_paths, read_project_config

    config = read_project_config(project)
    rel = _relative(repo, project)
    dirs = [
        _join(rel, folder.strip("/")) + "/"
        for key, default in _RESOURCE_PATHS
        for folder in config_paths(config, key, [default])
        if folder.strip("/")
    ]
    roots = {_join(rel, name) for name in _PROJECT_FILES}

    def read(path: str) -> bool:
        if path in roots:
            return True
        return PurePosixPath(path).suffix in _READ_SUFFIXES and path.startswith(tuple(dirs))

    return sorted(p for p in untracked if read(p))


def _relative(repo: Path, project: Path) -> str:
    rel = project.resolve().relative_to(repo.resolve()).as_posix()
    return "" if rel == "." else rel


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name

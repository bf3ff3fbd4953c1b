"""Git worktrees that hold a candidate patch, outside the user's checkout.

A worktree is a detached checkout of the failing commit under `$PATCHIT_HOME/worktrees/`.
Creating and removing one changes nothing the user can see: not the checked-out branch, the
index, the working tree or untracked files (git only records the worktree under `.git/`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.config import resolve_home
from patchit.errors import VcsError
from patchit.sandbox.git import run_git


def worktrees_home() -> Path:
    """Where patchit keeps its worktrees: `$PATCHIT_HOME/worktrees`."""
    return resolve_home() / "worktrees"


def _is_within(path: Path, parent: Path) -> bool:
    try:
        path.relative_to(parent)
    except ValueError:
        return False
    return True


def create_worktree(repo: Path, commit: str, dest: Path) -> Path:
    """Check out `commit` detached at `dest` and return its resolved root.

    `dest` must not exist yet and must lie outside the user's repository, so nothing patchit
    writes there can show up in the user's `git status`.
    """
    repo = repo.resolve()
    dest = dest.resolve()
    if _is_within(dest, repo):
        raise VcsError(f"worktree {dest} would sit inside the repository {repo}; use PATCHIT_HOME")
    if dest.exists():
        raise VcsError(f"worktree destination {dest} already exists; remove it first")
    dest.parent.mkdir(parents=True, exist_ok=True)
    run_git(repo, "worktree", "add", "--detach", "--quiet", str(dest), commit)
    return dest


def remove_tree(path: Path, tries: int = 3) -> None:
    """`rmtree`, tried again while the path is still there: a process of a killed run may
    still be writing into it as it exits ("Directory not empty"); what stays after the last
    try is left for the next sweep."""
    for attempt in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.2 * (attempt + 1))


def remove_worktree(repo: Path, path: Path) -> None:
    """Remove the worktree at `path` and git's record of it; a no-op if already gone.

    Only patchit's own record is dropped: `git worktree prune` would also forget the user's
    worktrees on unmounted or moved disks.
    """
    repo = repo.resolve()
    path = path.resolve()
    if path.exists():
        # --force twice also removes a worktree that is locked or has untracked build output.
        run_git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
        # Anything git refused (a dir it no longer knows, files it would not delete) goes too.
        remove_tree(path)
    for admin in _admin_dirs_for(repo, path):
        shutil.rmtree(admin, ignore_errors=True)


def _admin_dirs_for(repo: Path, path: Path) -> list[Path]:
    """git's `worktrees/<name>` records that point at `path` (left by a crash or rmtree)."""
    common = Path(run_git(repo, "rev-parse", "--git-common-dir").strip())
    common = common if common.is_absolute() else (repo / common).resolve()
    found = []
    for gitdir in (common / "worktrees").glob("*/gitdir"):
        try:
            target = Path(gitdir.read_text(encoding="utf-8").strip()).parent.resolve()
        except OSError:
            continue
        if target == path:
            found.append(gitdir.parent)
    return found


def worktree_repo(path: Path) -> Path | None:
    """The repository a worktree at `path` belongs to (from its `.git` file), or None."""
    try:
        text = (path / ".git").read_text(encoding="utf-8")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    admin = Path(text.partition(":")[2].strip())  # <repo>/.git/worktrees/<name>
    common = admin.parent.parent
    return common.parent if common.name == ".git" else common


def remove_worktrees_under(repo: Path, root: Path, prefix: str) -> int:
    """Remove the repository's worktrees (records and directories) that sit under `root` in
    an entry named `prefix...` (what a killed run of one incident left); how many."""
    common = Path(run_git(repo, "rev-parse", "--git-common-dir").strip())
    common = common if common.is_absolute() else (repo / common).resolve()
    root = root.resolve()
    removed = 0
    for gitdir in (common / "worktrees").glob("*/gitdir"):
        try:
            target = Path(gitdir.read_text(encoding="utf-8").strip()).parent
        except OSError:
            continue
        try:
            first = target.relative_to(root).parts[0]
        except (ValueError, IndexError):
            continue
        if first.startswith(prefix):
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(gitdir.parent, ignore_errors=True)
            removed += 1
    return removed


@contextmanager
def worktree(repo: Path, commit: str, dest: Path) -> Iterator[Path]:
    """A worktree for the duration of a `with` block, removed however the block ends."""
    root = create_worktree(repo, commit, dest)
    try:
        yield root
    finally:
        remove_worktree(repo, root)


def _packages_dirname(project_dir: Path) -> str:
    """The project's `packages-install-path` (default `dbt_packages`)."""
    project_file = project_dir / "dbt_project.yml"
    try:
        data = YAML(typ="safe").load(project_file.read_text(encoding="utf-8"))
    except (OSError, YAMLError):
        return "dbt_packages"
    value = data.get("packages-install-path") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else "dbt_packages"


def carry_packages(project_dir: Path, worktree_project_dir: Path) -> Path | None:
    """Copy the installed dbt packages (untracked, so absent from a worktree) into it.

    Returns the copied directory, or None when there was nothing to carry. A packages dir that
    the commit itself tracks is left as the commit has it.
    """
    dirname = _packages_dirname(project_dir)
    source = project_dir / dirname
    target = worktree_project_dir / dirname
    if not source.is_dir() or target.exists() or Path(dirname).is_absolute():
        return None
    shutil.copytree(source, target, symlinks=True)
    return target

"""Running git for patchit: one wrapper that never runs the user's hooks, signs, or prompts.

Every git call patchit makes goes through `run_git` (the healing loop, the evidence queries,
the demo and the benchmark alike), so a pre-commit hook in the user's repository, a signing key
that asks for a passphrase or a credential prompt can never run or block inside patchit.
(`patchit.intake.gitinfo` reads `.git` files directly and runs no git at all.)
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from patchit.errors import VcsError

# Neutralise per-repo and per-user configuration that would run code or wait for a human.
_SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
)
# A read-only query (log, diff, rev-parse) on a sane repository takes well under a second;
# a hung one (network filesystem, a lock) must not hold up evidence gathering.
QUERY_TIMEOUT_S = 30.0


def _git_env(
    base: Mapping[str, str] | None = None, index_file: Path | None = None
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
        }
    )
    # A GIT_DIR/GIT_WORK_TREE inherited from a hook that called us would redirect every command.
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)
    if index_file is not None:  # patchit's own scratch index, never the user's
        env["GIT_INDEX_FILE"] = str(index_file)
    return env


def run_git(
    repo: Path,
    *args: str,
    check: bool = True,
    timeout_s: float | None = None,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    index_file: Path | None = None,
) -> str:
    """Run `git -C repo <args>` and return its stdout; a failure raises VcsError with stderr.

    `config` holds extra `key=value` settings passed as `-c` (an identity, a default branch);
    they cannot turn hooks, signing or prompts back on. `env` is the environment git starts
    from (default: this process's). `timeout_s` bounds the run (None: no bound). `index_file`:
    the index git reads and writes instead of the repository's (`GIT_INDEX_FILE`).
    """
    proc = _run(repo, args, timeout_s, config, env, text=True, index_file=index_file)
    if check and proc.returncode != 0:
        stderr = proc.stderr.strip() or proc.stdout.strip()
        raise VcsError(f"git {' '.join(args)} failed in {repo} (exit {proc.returncode}): {stderr}")
    return str(proc.stdout)


def exists_at(repo: Path, commit: str, path: str) -> bool:
    """Whether `path` exists at `commit` (False too for a commit git does not know)."""
    proc = _run(repo, ("cat-file", "-e", f"{commit}:{path}"), QUERY_TIMEOUT_S, (), None, True)
    return proc.returncode == 0


def show_file(
    repo: Path, commit: str, path: str, timeout_s: float | None = QUERY_TIMEOUT_S
) -> str | None:
    """`path`'s text at `commit` byte for byte, as stored (`run_git`'s text mode would turn
    CRLF line ends into LF, and an edit derived from that text would not match the file);
    None where the file does not exist at that commit or is not UTF-8 text."""
    proc = _run(repo, ("show", f"{commit}:{path}"), timeout_s, (), None, text=False)
    if proc.returncode != 0:
        return None
    try:
        return bytes(proc.stdout).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _run(
    repo: Path,
    args: Sequence[str],
    timeout_s: float | None,
    config: Sequence[str],
    env: Mapping[str, str] | None,
    text: bool,
    index_file: Path | None = None,
) -> subprocess.CompletedProcess[Any]:
    extra = [arg for pair in config for arg in ("-c", pair)]
    cmd = ["git", "-C", str(repo), *extra, *_SAFE_CONFIG, *args]
    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=text,
            env=_git_env(env, index_file),
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
        )
    except OSError as exc:
        raise VcsError(f"cannot run git ({exc.strerror}); install git and put it on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise VcsError(f"git {' '.join(args)} in {repo} timed out after {timeout_s:g} s") from exc


def repo_root(path: Path) -> Path | None:
    """The top of the git working tree holding `path`, or None when it is not in one."""
    start = path if path.is_dir() else path.parent
    if not start.exists():
        return None
    out = run_git(start, "rev-parse", "--show-toplevel", check=False).strip()
    return Path(out).resolve() if out else None


def repo_and_head(path: Path) -> tuple[Path | None, str | None]:
    """`repo_root(path)` and its HEAD commit in one git call: (None, None) outside git, (root,
    None) in a repository with no commit yet."""
    start = path if path.is_dir() else path.parent
    if not start.exists():
        return None, None
    out = run_git(start, "rev-parse", "--show-toplevel", "--verify", "-q", "HEAD", check=False)
    lines = [line.strip() for line in out.splitlines()]
    if not lines or not lines[0]:
        return None, None
    return Path(lines[0]).resolve(), (lines[1] if len(lines) > 1 and lines[1] else None)


def head_commit(repo: Path) -> str:
    """The full sha of HEAD."""
    return run_git(repo, "rev-parse", "--verify", "HEAD").strip()


def dirty_tracked_files(
    repo: Path, under: Path | None = None, repo_is_root: bool = False
) -> list[str]:
    """Tracked files with uncommitted changes (staged or not), relative to the repo root.

    Untracked files do not count: they are not part of any commit a worktree could reproduce,
    and a build directory full of them must not make a repository look edited. With
    `repo_is_root` (`repo` is `repo_root`'s answer), `under` is placed without asking git.
    """
    pathspec: list[str] = []
    if under is not None:
        root = repo.resolve() if repo_is_root else None
        root = root or Path(run_git(repo, "rev-parse", "--show-toplevel").strip()).resolve()
        rel = under.resolve().relative_to(root) if under.is_absolute() else under
        pathspec = ["--", str(rel) if str(rel) != "." else "."]
    out = run_git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no", *pathspec)
    return sorted(name for _status, name, _source in porcelain_entries(out))


def porcelain_entries(out: str) -> Iterator[tuple[str, str, str | None]]:
    """(status, path, source path of a rename or copy, else None) per entry of `git status
    --porcelain=v1 -z`: a rename/copy's source follows as a separate NUL-terminated field."""
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        status, name, source = entry[:2], entry[3:], None
        if "R" in status or "C" in status:
            source = entries[i] if i < len(entries) and entries[i] else None
            i += 1
        yield status, name, source


def is_ancestor(repo: Path, ancestor: str, commit: str) -> bool:
    """Whether `ancestor` is reachable from `commit` (`git merge-base --is-ancestor`)."""
    try:
        run_git(repo, "merge-base", "--is-ancestor", ancestor, commit)
    except VcsError:
        return False
    return True

"""Read-only git queries for evidence: recent history of files and what changed since a commit.

Every call runs git through `patchit.sandbox.git.run_git` (hooks disabled, no prompts),
bounded by `QUERY_TIMEOUT_S`, and never writes to the repository.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import Path

from patchit.errors import VcsError
from patchit.events.model import UniversalFailureEvent
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git

_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's well-known empty tree id


def _query(repo: Path, *args: str) -> str:
    return run_git(repo, *args, timeout_s=QUERY_TIMEOUT_S)


def recent_history(repo: Path, paths: list[str], n: int = 5) -> list[str]:
    """The last `n` commits touching `paths`: "<short sha> <date> <author> <subject>"."""
    if not paths:
        return []
    out = _query(repo, "log", f"-n{n}", "--date=short", "--format=%h %ad %an %s", "--", *paths)
    return [line for line in out.splitlines() if line.strip()]


def _has_parent(repo: Path, commit: str) -> bool:
    try:
        _query(repo, "rev-parse", "--verify", "--quiet", f"{commit}^1^{{commit}}")
    except VcsError:
        return False
    return True


def changed_files(repo: Path, base: str | None, head: str) -> list[str]:
    """Files changed between `base` and `head` (base None: head's own change, root included)."""
    if base is None:
        base = f"{head}~1" if _has_parent(repo, head) else _EMPTY_TREE
    out = _query(repo, "diff", "--name-only", "--no-renames", base, head)
    return [line for line in out.splitlines() if line.strip()]


def history_and_changes(
    repo_root: Path, paths: list[str], base: str | None, head: str, notes: list[str]
) -> tuple[list[str], list[str]]:
    """Recent commits of `paths` and files changed base..head; what fails becomes a note."""
    log: list[str] = []
    changed: list[str] = []
    try:
        log = recent_history(repo_root, paths)
    except VcsError as exc:
        notes.append(f"git history unavailable: {exc}")
    try:
        changed = changed_files(repo_root, base, head)
    except VcsError as exc:
        notes.append(f"changed files unavailable: {exc}")
    return log, changed


BREAKING_DIFF_MAX_CHARS = 12_000
# Files whose content may be credentials: their diff is named, never shown (redaction is a
# second line of defence, not the first).
_SECRET_FILES = ("*.env", "*.env.*", ".env*", "*secret*", "*credential*", "profiles.yml")


def _secret_file(path: str) -> bool:
    name = Path(path).name.lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in _SECRET_FILES)


def breaking_diff(
    repo: Path,
    base: str | None,
    head: str,
    first: Sequence[str] = (),
    max_chars: int = BREAKING_DIFF_MAX_CHARS,
) -> str:
    """The diff base..head (base None: head's own change), file by file, `first` paths first.

    Capped at `max_chars`: the files that matter to the failure come first, so a cap cuts the
    least relevant ones; what was cut is named on the last line. Binary files are summarised
    by git itself; files that may hold secrets are named without their content.
    """
    if base is None:
        base = f"{head}~1" if _has_parent(repo, head) else _EMPTY_TREE
    files = changed_files(repo, base, head)
    ordered = [p for p in first if p in files] + [p for p in files if p not in first]
    parts: list[str] = []
    used = 0
    for number, path in enumerate(ordered):
        if _secret_file(path):
            part = f"diff --git a/{path} b/{path}\n(not shown: the file may hold secrets)\n"
        else:
            part = _query(repo, "diff", "--no-color", "--no-renames", "-U3", base, head, "--", path)
        if used + len(part) > max_chars:
            room = max_chars - used
            if room > 200:
                parts.append(part[:room].rsplit("\n", 1)[0] + "\n[... diff of this file cut]\n")
            rest = ordered[number + 1 :] if room > 200 else ordered[number:]
            if rest:
                parts.append(f"[... size cap: diff of {', '.join(rest)} not shown]\n")
            break
        parts.append(part)
        used += len(part)
    return "".join(parts)


def breaking_diff_or_note(
    repo_root: Path, base: str | None, head: str, first: list[str], notes: list[str]
) -> str:
    """`breaking_diff`, or "" with a note saying why it is missing (evidence never raises)."""
    try:
        return breaking_diff(repo_root, base, head, first)
    except VcsError as exc:
        notes.append(f"breaking diff unavailable: {exc}")
        return ""


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@")


def added_lines(diff: str) -> dict[str, set[int]]:
    """Per file of a unified diff (`breaking_diff`), the line numbers, in the new file, of
    the lines the change added or rewrote. Deleted files and cut parts add nothing."""
    found: dict[str, set[int]] = {}
    path: str | None = None
    line = 0
    for text in diff.splitlines():
        if text.startswith("diff --git "):
            path = None
        elif text.startswith("+++ "):
            target = text[4:].strip()
            path = target[2:] if target.startswith("b/") else None
            if path is not None:
                found.setdefault(path, set())
        elif path is not None and (hunk := _HUNK.match(text)):
            line = int(hunk.group("start"))
        elif path is not None and line:
            if text.startswith("+"):
                found[path].add(line)
                line += 1
            elif text.startswith(" "):
                line += 1
    return found


def change_base(repo: Path, base: str | None, head: str) -> str | None:
    """The full commit id the breaking change is measured from: `base` (the last good
    commit) when given, else `head`'s parent; None for a root commit or without git."""
    rev = base or f"{head}~1"
    try:
        return _query(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip() or None
    except VcsError:
        return None


def split_diff(diff: str) -> dict[str, str]:
    """A multi-file unified diff (`breaking_diff`) as path -> that file's part, in order.
    A size-cap line that follows the last file is dropped."""
    parts: dict[str, str] = {}
    path: str | None = None
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git "):
            _, _, b_side = line.rstrip("\n").partition(" b/")
            path = b_side or None
            if path is not None:
                parts[path] = ""
        elif line.startswith("[... size cap"):
            path = None
        if path is not None:
            parts[path] += line
    return parts


def resolve_commit(repo: Path, rev: str) -> str | None:
    """The full id of the commit `rev` names, or None."""
    try:
        return run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}",
                       timeout_s=QUERY_TIMEOUT_S).strip()  # fmt: skip
    except VcsError:
        return None


def last_good_on_line(repo: Path, last_good: str | None, failing: str) -> str | None:
    """`last_good` when it is the failing commit or one of its ancestors, else None. A green
    run on another branch (or before a history rewrite) is not where this line's change
    started: diffing from it would show that branch's own work, reversed, as the change."""
    if not last_good:
        return None
    on_line = _on_line(repo, last_good, failing)
    # not resolvable here: the callers' own fallbacks apply
    return last_good if on_line is not False else None


def is_on_line(repo: Path, commit: str, failing: str) -> bool:
    """Whether `commit` is the failing commit or one of its ancestors (False when either
    cannot be resolved here)."""
    return bool(_on_line(repo, commit, failing))


def _on_line(repo: Path, commit: str, failing: str) -> bool | None:
    """Whether `commit` is `failing` or one of its ancestors; None when either cannot be
    resolved here."""
    sha, failing_sha = resolve_commit(repo, commit), resolve_commit(repo, failing)
    if sha is None or failing_sha is None:
        return None
    return sha == failing_sha or _is_ancestor(repo, sha, failing_sha)


def on_this_line(
    repo: Path, last_good: str | None, event: UniversalFailureEvent, notes: list[str]
) -> str | None:
    """`last_good_on_line` for the event's failing commit, saying in `notes` when memory's
    last good commit was set aside."""
    kept = last_good_on_line(repo, last_good, event.commit or "HEAD")
    if last_good and kept is None:
        notes.append(
            f"the last good commit {last_good[:12]} is not an ancestor of the failing one "
            "(a green run on another branch): the change is read from its parent"
        )
    return kept


def _is_ancestor(repo: Path, commit: str, of: str) -> bool:
    try:
        run_git(repo, "merge-base", "--is-ancestor", commit, of, timeout_s=QUERY_TIMEOUT_S)
    except VcsError:
        return False
    return True


def breaking_base(repo: Path, failing: str, last_good: str | None) -> tuple[str, str] | None:
    """(commit, where it came from): memory's last good commit when it is an ancestor of the
    failing one, else the failing commit's parent; None when neither exists. The one base of
    the breaking change for the revert, the fix-its and the intents."""
    failing_sha = resolve_commit(repo, failing)
    if failing_sha is None:
        return None
    sha = resolve_commit(repo, last_good) if last_good else None
    # not an ancestor (another branch, rewritten history): the parent instead
    if sha and sha != failing_sha and _is_ancestor(repo, sha, failing_sha):
        return sha, "last good commit"
    parent = resolve_commit(repo, f"{failing_sha}^1")
    return (parent, "parent commit") if parent else None

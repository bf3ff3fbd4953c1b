"""A verified fix as GitHub review suggestions on the pull request's own lines.

A suggestion replaces lines of the file as the pull request's head commit has it (the RIGHT
side of the pull request's diff), and GitHub accepts a review comment only on lines that diff
shows (changed lines and their three lines of context). The fix was verified on the commit
the CI job checked out, which is often GitHub's test merge commit rather than the head; so the
fix is first carried onto the head commit (`fix_on_head`, a cherry-pick in a worktree under
`$PATCHIT_HOME`, the checkout untouched), and its hunks are read against the head's files.

A fix becomes suggestions only when it is small (a few lines in one or two files, no file
added, removed or renamed) and every hunk lands on lines the pull request's diff shows; any
other fix goes to a pull request into the head branch (`patchit.delivery.ci_deliver`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchit.errors import VcsError
from patchit.sandbox.git import run_git, show_file
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.sync.branch import AUTHOR_EMAIL, AUTHOR_NAME

MAX_FILES = 2
MAX_LINES = 10  # lines removed plus lines added
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Hunk:
    """One `git diff -U0` hunk: `old_count` lines from `old_start` become `new_lines`."""

    path: str
    old_start: int
    old_count: int
    new_lines: tuple[str, ...]


@dataclass(frozen=True)
class Suggestion:
    """One review comment: lines `start_line`..`line` of `path` (RIGHT side) become `lines`."""

    path: str
    start_line: int
    line: int
    lines: tuple[str, ...]

    def body(self, note: str = "") -> str:
        fence = "````" if any(t.startswith("```") for t in self.lines) else "```"
        text = "\n".join(self.lines)
        return f"{note}{fence}suggestion\n{text}{chr(10) if text else ''}{fence}\n"

    def comment(self, note: str = "") -> dict[str, object]:
        """The comment as `POST /pulls/{n}/reviews` takes it."""
        out: dict[str, object] = {"path": self.path, "line": self.line, "side": "RIGHT",
                                  "body": self.body(note)}  # fmt: skip
        if self.start_line < self.line:
            out.update(start_line=self.start_line, start_side="RIGHT")
        return out


def read_hunks(repo: Path, old: str, new: str) -> tuple[list[Hunk], str]:
    """The `-U0` hunks from `old` to `new`, or ([], why they cannot be suggestions)."""
    status = run_git(repo, "diff", "--no-ext-diff", "--name-status", "-M", old, new).split("\n")
    for line in filter(None, status):
        kind, *_paths = line.split("\t")
        if kind != "M":
            return [], f"it adds, removes or renames a file ({line.strip()})"
    text = run_git(repo, "diff", "--no-ext-diff", "--no-color", "-U0", old, new)
    hunks: list[Hunk] = []
    path = ""
    current: dict[str, object] | None = None
    for line in text.split("\n"):
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else line[4:]
        elif match := _HUNK.match(line):
            if current is not None:
                hunks.append(Hunk(**current))  # type: ignore[arg-type]
            start, count = int(match.group(1)), match.group(2)
            old_count = 1 if count is None else int(count)
            current = {"path": path, "old_start": start, "old_count": old_count, "new_lines": ()}
        elif current is not None and line.startswith("+") and not line.startswith("+++ "):
            current["new_lines"] = (*current["new_lines"], line[1:])  # type: ignore[misc]
        elif line.startswith("Binary files"):
            return [], "it changes a binary file"
    if current is not None:
        hunks.append(Hunk(**current))  # type: ignore[arg-type]
    return hunks, ""


def pull_request_lines(repo: Path, merge_base: str, head: str) -> dict[str, set[int]]:
    """The RIGHT-side lines of each file the pull request's diff shows (hunks with GitHub's
    three lines of context): only these take a review comment."""
    text = run_git(repo, "diff", "--no-ext-diff", "--no-color", "-U3", merge_base, head)
    shown: dict[str, set[int]] = {}
    path = ""
    for line in text.split("\n"):
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else ""
        elif (match := _HUNK.match(line)) and path:
            start = int(match.group(3))
            count = 1 if match.group(4) is None else int(match.group(4))
            shown.setdefault(path, set()).update(range(start, start + count))
    return shown


def as_suggestions(
    repo: Path, head: str, fixed: str, shown: dict[str, set[int]]
) -> tuple[list[Suggestion], str]:
    """The fix from `head` to `fixed` as suggestions on `head`'s lines, or ([], why not)."""
    hunks, why = read_hunks(repo, head, fixed)
    if why:
        return [], why
    if not hunks:
        return [], "it changes nothing on the pull request's head"
    files = sorted({h.path for h in hunks})
    size = sum(h.old_count + len(h.new_lines) for h in hunks)
    if len(files) > MAX_FILES or size > MAX_LINES:
        return [], f"it changes {size} lines in {len(files)} files (suggestions: up to " \
                   f"{MAX_LINES} lines in {MAX_FILES} files)"  # fmt: skip
    out = []
    for hunk in hunks:
        text = show_file(repo, head, hunk.path)
        if text is None:
            return [], f"{hunk.path} is not text at the head commit"
        suggestion = _suggestion(hunk, text.splitlines())
        lines = set(range(suggestion.start_line, suggestion.line + 1))
        if not lines <= shown.get(hunk.path, set()):
            where = f"{hunk.path} lines {suggestion.start_line}-{suggestion.line}"
            return [], f"{where} are not in the pull request's diff (no review comment there)"
        out.append(suggestion)
    return out, ""


def _suggestion(hunk: Hunk, old: list[str]) -> Suggestion:
    if hunk.old_count > 0:
        last = hunk.old_start + hunk.old_count - 1
        return Suggestion(hunk.path, hunk.old_start, last, hunk.new_lines)
    # a pure insertion after line old_start: the suggestion keeps an existing line around it
    if hunk.old_start == 0:
        return Suggestion(hunk.path, 1, 1, (*hunk.new_lines, old[0] if old else ""))
    anchor = old[hunk.old_start - 1]
    return Suggestion(hunk.path, hunk.old_start, hunk.old_start, (anchor, *hunk.new_lines))


def fix_on_head(
    repo: Path, fixes: list[str], head: str, scratch: Path
) -> tuple[str | None, list[str]]:
    """The fix commits `fixes` (each one commit on the commit it was verified at) carried onto
    `head`: (the resulting commit, the fixes that did not apply). A fix already on `head` is
    taken as it is; the others are cherry-picked in a worktree at `scratch`, removed after."""
    if len(fixes) == 1 and _parent(repo, fixes[0]) == head:
        return fixes[0], []
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    tree = create_worktree(repo, head, scratch)
    left: list[str] = []
    try:
        for fix in fixes:
            before = run_git(tree, "rev-parse", "HEAD").strip()
            run_git(
                tree, "-c", f"user.name={AUTHOR_NAME}", "-c", f"user.email={AUTHOR_EMAIL}",
                "cherry-pick", "--no-rerere-autoupdate", fix, check=False,
            )  # fmt: skip
            if run_git(tree, "rev-parse", "HEAD").strip() == before:  # a conflict: left out
                run_git(tree, "cherry-pick", "--abort", check=False)
                run_git(tree, "reset", "-q", "--hard", before, check=False)
                left.append(fix)
        top = run_git(tree, "rev-parse", "HEAD").strip()
    finally:
        remove_worktree(repo, tree)
    return (None if top == _resolve(repo, head) else top), left


def _parent(repo: Path, commit: str) -> str | None:
    try:
        return run_git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^").strip() or None
    except VcsError:
        return None


def _resolve(repo: Path, rev: str) -> str:
    return run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()

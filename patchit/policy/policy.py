"""The safety policy: which edits patchit may ever make, whatever proposed them.

A candidate is refused, with a one-line reason, when an edit would touch a protected (CI
configuration, patchit's own config, hooks, install-time code), denied or not-allowed path,
too many files or lines (the sites of a rename it follows count as one file, see
`patchit.policy.renames`), anything outside the repository (absolute paths, `..`, symlinks), a
binary or missing file, or when its search text does not occur exactly once. An edit with no
search text creates a file where nothing is (a deleted model restored, `restore_deleted`);
a file restored byte for byte as the repository held it before a commit deleted it is not
new code, and its lines do not count against `max_lines`.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path, PurePosixPath

from patchit.config import PolicyConfig
from patchit.errors import VcsError
from patchit.patching.base import Edit, PatchCandidate
from patchit.patching.diffs import unified_diff
from patchit.patching.lineends import match_edit
from patchit.policy.renames import count_files
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git, show_file

BINARY_SNIFF_BYTES = 8192


def _path_forms(rel: str) -> list[str]:
    """The path and every trailing sub-path down to the basename, so globs bite at any depth."""
    parts = PurePosixPath(rel).parts
    return ["/".join(parts[i:]) for i in range(len(parts))]


def match_glob(rel: str, patterns: list[str], case_sensitive: bool = True) -> str | None:
    """The first pattern matching the path or any trailing part of it, else None."""
    for form in _path_forms(rel):
        for pattern in patterns:
            if case_sensitive and fnmatch.fnmatchcase(form, pattern):
                return pattern
            if not case_sensitive and fnmatch.fnmatchcase(form.lower(), pattern.lower()):
                return pattern
    return None


def _check_path_shape(path: str) -> str | None:
    if not path.strip():
        return "an edit has an empty path"
    if "\\" in path or "\x00" in path:
        return f"{path!r}: backslashes and NUL bytes are not allowed in edit paths"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return f"{path}: absolute paths are refused; edits name files relative to the repository"
    parts = PurePosixPath(path).parts
    if ".." in parts:
        return f"{path}: '..' would leave the repository"
    if ".git" in parts:
        return f"{path}: git's own files are never edited"
    return None


def check_path(rel: str, policy: PolicyConfig) -> str | None:
    """Why the policy refuses edits to `rel` (shape, deny and allow globs), or None."""
    return _check_path_shape(rel) or _check_globs(rel, policy)


def _check_globs(rel: str, policy: PolicyConfig) -> str | None:
    protected = match_glob(rel, policy.protected, case_sensitive=False)
    if protected is not None:
        return (
            f"{rel}: protected path (CI config, patchit's config, hooks or install-time code), "
            f"glob {protected!r}; to allow it, leave it out of [policy] protected"
        )
    denied = match_glob(rel, policy.deny, case_sensitive=False)
    if denied is not None:
        return f"{rel}: matches deny glob {denied!r}"
    if match_glob(rel, policy.allow) is None:
        return f"{rel}: matches no allow glob ({', '.join(policy.allow)})"
    return None


def _check_location(rel: str, repo_root: Path, create: bool = False) -> str | None:
    """Inside the repository, not through or at a symlink, an existing text file (with
    `create`: nothing at all there yet)."""
    root = repo_root.resolve()
    target = root / rel
    resolved = target.resolve()
    if not resolved.is_relative_to(root):
        return f"{rel}: resolves to {resolved}, outside the repository {root}"
    current = root
    for part in PurePosixPath(rel).parts:
        current = current / part
        if current.is_symlink():
            what = "is a symlink" if current == target else f"goes through symlink {current}"
            return f"{rel}: {what}; patchit edits regular files only"
    if create:
        return f"{rel}: already exists; a new file's edit must find nothing there" if (
            os.path.lexists(target)) else None  # fmt: skip
    if not target.is_file():
        return f"{rel}: no such file in the repository"
    with target.open("rb") as fh:
        if b"\x00" in fh.read(BINARY_SNIFF_BYTES):
            return f"{rel}: binary file (NUL bytes); patchit edits text files only"
    return None


def _first_edit(candidate: PatchCandidate, rel: str) -> Edit:
    return next(e for e in candidate.edits if PurePosixPath(e.path).as_posix() == rel)


def restored_verbatim(repo_root: Path, rel: str, text: str) -> bool:
    """Whether `text` is `rel` byte for byte as the repository held it before the last commit
    that deleted it: lines its authors wrote and reviewed, which the line limit (a limit on
    new code to review) does not count. The candidate is still judged as undoing the deletion
    (`patchit.policy.intents`)."""
    try:
        found = run_git(repo_root, "log", "-1", "--format=%H", "--diff-filter=D", "--", rel,
                        timeout_s=QUERY_TIMEOUT_S).strip()  # fmt: skip
    except VcsError:
        return False
    return bool(found) and show_file(repo_root, f"{found}^", rel) == text


def _read_text(path: Path) -> str | None:
    try:  # bytes, not text mode: a CRLF file is matched as `apply_edits` matches it
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def _changed_lines(diff: str) -> int:
    """Added plus removed lines of a one-file unified diff (its two header lines skipped)."""
    return sum(1 for line in diff.splitlines()[2:] if line[:1] in "+-")


def check_policy(candidate: PatchCandidate, repo_root: Path, policy: PolicyConfig) -> str | None:
    """A one-line refusal reason, or None when every edit is allowed."""
    if not candidate.edits:
        return "the candidate has no edits"
    paths = list(dict.fromkeys(edit.path for edit in candidate.edits))
    for path in paths:
        reason = _check_path_shape(path)
        if reason:
            return reason
    rels = [PurePosixPath(p).as_posix() for p in paths]
    # a file the candidate creates: its first edit has no search text and nothing is there
    created = {rel for rel in rels if _first_edit(candidate, rel).search == ""
               and not os.path.lexists(repo_root / rel)}  # fmt: skip
    for rel in rels:
        reason = _check_globs(rel, policy) or _check_location(rel, repo_root, rel in created)
        if reason:
            return reason
    if not candidate.follows and len(set(rels)) > policy.max_files:
        return f"touches {len(set(rels))} files, more than max_files={policy.max_files}"
    contents: dict[str, tuple[str, str]] = {}
    for edit in candidate.edits:
        rel = PurePosixPath(edit.path).as_posix()
        if rel not in contents and rel in created:
            if "\x00" in edit.replace:
                return f"{rel}: binary content (NUL bytes); patchit writes text files only"
            contents[rel] = ("", edit.replace)
            continue
        if rel not in contents:
            text = _read_text(repo_root / rel)
            if text is None:
                return f"{rel}: not UTF-8 text; patchit edits text files only"
            contents[rel] = (text, text)
        before, current = contents[rel]
        if not edit.search:
            return f"{rel}: an edit has empty search text"
        match = match_edit(current, edit.search, edit.replace)
        if match.count != 1:
            found = "does not occur" if match.count == 0 else f"occurs {match.count} times"
            return f"{rel}: search text {found} in the file (it must occur exactly once)"
        contents[rel] = (before, current.replace(match.search, match.replace, 1))
    lines = {
        rel: 0 if rel in created and restored_verbatim(repo_root, rel, after)
        else _changed_lines(unified_diff(rel, before, after, context_lines=0))
        for rel, (before, after) in contents.items()
    }  # fmt: skip
    sites, too_many = count_files(
        contents, candidate.follows, policy.max_files, policy.max_rename_sites
    )
    if too_many:
        return too_many
    changed = sum(n for rel, n in lines.items() if rel not in sites)
    changed += max((lines[rel] for rel in sites), default=0)
    if changed > policy.max_lines:
        return f"changes {changed} lines, more than max_lines={policy.max_lines}"
    return None

"""The normalised hash of a diff: how the attempt memory tells "the same change" apart.

Two candidates that make the same change hash the same even if the file moved around them
(hunk line numbers), the diff tool stamped its headers, or one of them also touched blank lines
or trailing whitespace. It lives in memory because memory stores and compares it; the diffs
themselves are made by `patchit.patching.diffs`.
"""

from __future__ import annotations

import hashlib
import re

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _file_of(header_line: str) -> str:
    """`+++ b/models/x.sql\t2024-01-01 ...` -> `models/x.sql`."""
    name = header_line[4:].split("\t", 1)[0].strip()
    if name.startswith(("a/", "b/")):
        name = name[2:]
    return name


def _cancel_unchanged(removed: list[str], added: list[str]) -> tuple[list[str], list[str]]:
    """Lines a hunk removes and adds back unchanged (whitespace edits) are no change."""
    remaining = list(added)
    kept_removed = []
    for line in removed:
        if line in remaining:
            remaining.remove(line)
        else:
            kept_removed.append(line)
    return kept_removed, remaining


class _FileChanges:
    def __init__(self, name: str) -> None:
        self.name = name
        self.removed: list[str] = []
        self.added: list[str] = []

    def add_hunk(self, removed: list[str], added: list[str]) -> None:
        kept_removed, kept_added = _cancel_unchanged(removed, added)
        self.removed += kept_removed
        self.added += kept_added

    def render(self) -> list[str]:
        # Removed lines, then added lines, per file: the same change split into hunks
        # differently (other context sizes) renders the same.
        if not self.removed and not self.added:
            return []
        return [
            f"file {self.name}",
            *("-" + x for x in self.removed),
            *("+" + x for x in self.added),
        ]


def normalise_diff(diff: str) -> str:
    """Only what the diff changes: file names and the added/removed lines, stripped of noise.

    Hunks are read by their line counts, so a removed SQL comment (`--- x`) is not taken for a
    file header.
    """
    files: list[_FileChanges] = []
    removed: list[str] = []
    added: list[str] = []
    old_left = new_left = 0
    for raw in diff.splitlines():
        if old_left > 0 or new_left > 0:
            tag, body = raw[:1], raw[1:].rstrip()
            if tag == "-":
                old_left -= 1
                if body.strip():
                    removed.append(body)
            elif tag == "+":
                new_left -= 1
                if body.strip():
                    added.append(body)
            elif tag != "\\":  # context line (" ", or an empty line some tools emit)
                old_left -= 1
                new_left -= 1
            continue
        if files:
            files[-1].add_hunk(removed, added)
        removed, added = [], []
        line = raw.rstrip()
        hunk = _HUNK.match(line)
        if hunk:
            old_left = int(hunk.group(1) or 1)
            new_left = int(hunk.group(2) or 1)
            if not files:
                files.append(_FileChanges("?"))
        elif line.startswith("+++ "):
            files.append(_FileChanges(_file_of(line)))
        # other headers (diff --git, index, ---, mode lines) and "\ No newline" say nothing
    if files:
        files[-1].add_hunk(removed, added)
    out = [line for changes in files for line in changes.render()]
    return "\n".join(out) + ("\n" if out else "")


def diff_hash(diff: str) -> str:
    """sha256 hex of the normalised diff."""
    return hashlib.sha256(normalise_diff(diff).encode("utf-8")).hexdigest()

"""The breaking change in one file, for the fix-its that complete new code: the file's text
before the change (the last good commit, else the failing commit's parent: `change_base`),
its text now (the checkout the candidate edits), and which of its lines the change wrote."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from patchit.errors import VcsError
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate
from patchit.patching.fixits._common import read_repo_file
from patchit.patching.renames import file_at
from patchit.patching.revert import change_base


@dataclass(frozen=True)
class FileChange:
    """`path` before the change (None: the change added it) and now; `written`: the 1-based
    numbers of the lines of `now` that the change added or rewrote."""

    path: str
    before: str | None
    now: str
    written: frozenset[int]


def file_change(evidence: Evidence, path: str) -> FileChange | None:
    """The change in `path`; None when there is no change to read or it left the file as it
    was."""
    now = read_repo_file(evidence, path)
    event = evidence.event
    repo = Path(event.repo_path or evidence.repo_root)
    if now is None:
        return None
    try:
        found = change_base(repo, event.commit or "HEAD", evidence.last_good_commit)
    except VcsError:
        return None
    if found is None:
        return None
    before = file_at(repo, found[0], path)
    if before == now:
        return None
    if before is None:
        return FileChange(path, None, now, frozenset(range(1, now.count("\n") + 2)))
    old, new = before.splitlines(), now.splitlines()
    written: set[int] = set()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "insert"):
            written.update(range(j1 + 1, j2 + 1))
    return FileChange(path, before, now, frozenset(written))


def sql_unit_change(evidence: Evidence) -> FileChange | None:
    """The change in the failing unit's SQL file; None when the unit is no SQL file or the
    change left it as it was."""
    path = evidence.unit_path
    if path is None or not path.endswith(".sql"):
        return None
    return file_change(evidence, path)


def rewrite_candidate(
    fixit: FixIt, change: FileChange, text: str, rationale: str, confidence: float
) -> list[PatchCandidate]:
    """The one candidate that turns the changed file into `text`."""
    return [fixit.candidate([derive_edit(change.path, change.now, text)], rationale, confidence)]

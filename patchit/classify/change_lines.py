"""What the breaking change wrote, as the classifier reads it.

An error that names what is not there (a table, a CTE) reads like a missing warehouse object,
but when the change itself wrote that name on the failing unit's lines, the name is the
change's: a mistyped CTE on the line the commit added is code, whatever the warehouse lacks.
"""

from __future__ import annotations

import re

from patchit.evidence.gitlog import split_diff
from patchit.evidence.model import Evidence


def _unit_diff(evidence: Evidence) -> str:
    """The breaking diff's part for the failing unit's file (or the tested model's)."""
    parts = split_diff(evidence.breaking_diff)
    for path in (evidence.unit_path, evidence.tested_model_path):
        if path and path in parts:
            return parts[path]
    return ""


def _changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """(added, removed) line texts of a one-file unified diff, headers left out."""
    added: list[str] = []
    removed: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            continue
        if line.startswith("+"):
            added.append(line[1:])
        elif line.startswith("-"):
            removed.append(line[1:])
    return added, removed


def written_by_change(evidence: Evidence, name: str) -> bool:
    """`name` (a table or CTE name; a schema prefix and quotes are dropped) is on a line the
    breaking change added to the failing unit's file and on none it removed: the change
    introduced the name, it did not only move it."""
    bare = name.rpartition(".")[2].strip('"').strip()
    if not bare:
        return False
    word = re.compile(rf"(?<!\w){re.escape(bare)}(?!\w)", re.IGNORECASE)
    added, removed = _changed_lines(_unit_diff(evidence))
    return any(word.search(t) for t in added) and not any(word.search(t) for t in removed)

"""A model the change deleted while the project still refs it -> the file restored, as it was.

The inliner (`deleted_refs`) completes such a deletion where it can: the deleted model's SQL
goes where it is still read. It cannot where something names the model that is no SQL: a
unit test on a consumer gives `input: ref('<deleted>')` (jaffle-shop's `order_items` tests
its supply costs that way), a saved query or an exposure depends on it, or the diff of the
deleted file was cut. Then the one candidate left that makes the project whole is the deleted
file itself, read from the change's base commit byte for byte, with the entry of the model
the change took out of a properties file (or that file, when the change deleted it too).

Restoring is not a forward fix in disguise: it re-creates what the author deleted, so the
candidate undoes the intent "deleted file ..." and `patchit.policy.intents` gives it its
review ("reverts your change: ..."): verified, reported with what was restored and why, and
`needs_review` unless the operator's `[policy] revert = "allow"`. It is ranked after the
inliner and carries a tag of its own, so a failed inline does not bar it.
"""

from __future__ import annotations

import difflib
import re
from io import StringIO
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.evidence.gitlog import split_diff
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import Edit, PatchCandidate
from patchit.patching.fixits._common import read_repo_file
from patchit.sandbox.git import show_file

_YAML = (".yml", ".yaml")
TAG = "restore_deleted"


def _base(evidence: Evidence) -> str | None:
    return evidence.change_base or evidence.last_good_commit


def deleted_model_file(evidence: Evidence, name: str) -> tuple[str, str] | None:
    """(path, text at the change's base) of the model file `name` the change deleted: among
    the changed files, gone from the checkout, present at the base; None otherwise."""
    base = _base(evidence)
    if base is None:
        return None
    for path in evidence.changed_files:
        if path.rsplit("/", 1)[-1] not in (f"{name}.sql", f"{name}.py"):
            continue
        if read_repo_file(evidence, path) is not None:
            continue
        text = show_file(Path(evidence.repo_root), base, path)
        if text is not None:
            return path, text
    return None


def _entry_lines(lines: list[str], name: str) -> tuple[int, int] | None:
    """[start, end) of the `- name: <name>` item in a properties file's lines: the item and
    every line indented deeper than its dash (trailing blank lines included)."""
    head = re.compile(rf"^(\s*)-\s+name:\s*['\"]?{re.escape(name)}['\"]?\s*(#.*)?$")
    for i, line in enumerate(lines):
        found = head.match(line.rstrip("\r\n"))
        if found is None:
            continue
        indent = len(found.group(1))
        end = i + 1
        while end < len(lines):
            text = lines[end].rstrip("\r\n")
            if text.strip() and len(text) - len(text.lstrip()) <= indent:
                break
            end += 1
        return i, end
    return None


def _parses(text: str) -> bool:
    try:
        YAML(typ="safe").load(StringIO(text))
    except YAMLError:
        return False
    return True


def restored_entry(before: str, now: str, name: str) -> str | None:
    """`now` with the item of `name` that `before` had put back where it stood (mapped through
    the lines the two texts share); None when `now` still has it, `before` had none, or the
    result does not parse."""
    old, new = before.splitlines(keepends=True), now.splitlines(keepends=True)
    if _entry_lines(new, name) is not None:
        return None
    span = _entry_lines(old, name)
    if span is None:
        return None
    start, end = span
    at = len(new)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for _tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if i1 <= start < i2 or start == i1:
            at = j1 if _tag != "equal" else j1 + (start - i1)
            break
    block = old[start:end]
    if at == len(new) and new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    after = "".join(new[:at] + block + new[at:])
    return after if _parses(after) else None


def restore_yaml(evidence: Evidence, name: str) -> list[Edit]:
    """Edits putting back what the change took out of the properties files about `name`: a
    deleted file that described it, whole; else its item in a file the change edited."""
    base = _base(evidence)
    if base is None:
        return []
    edits = []
    for path, part in split_diff(evidence.breaking_diff).items():
        if not path.endswith(_YAML) or name not in part:
            continue
        before = show_file(Path(evidence.repo_root), base, path)
        if before is None or _entry_lines(before.splitlines(keepends=True), name) is None:
            continue
        now = read_repo_file(evidence, path)
        if now is None:
            edits.append(Edit(path=path, search="", replace=before))
        elif (after := restored_entry(before, now, name)) is not None:
            edits.append(derive_edit(path, now, after))
    return edits


def restore_candidate(
    evidence: Evidence, name: str, readers: list[str], strategy: str, tier: int
) -> PatchCandidate | None:
    """The deleted model `name` restored from the change's base, with its YAML; None when
    the change deleted no such file."""
    found = deleted_model_file(evidence, name)
    if found is None:
        return None
    path, text = found
    yaml_edits = restore_yaml(evidence, name)
    base = (_base(evidence) or "")[:12]
    also = f" and its entry in {', '.join(e.path for e in yaml_edits)}" if yaml_edits else ""
    who = ", ".join(readers) if readers else "the project"
    why = (
        f"the change deleted {path} while {who} still ref('{name}') and no rewrite of those "
        f"readers completes the deletion: restores {path}{also} from {base}, as it was there "
        "(it re-creates what the change deleted: a human decides whether the deletion or the "
        "references should go)"
    )
    edits = [Edit(path=path, search="", replace=text), *yaml_edits]
    return PatchCandidate(strategy=strategy, tag=TAG, tier=tier, edits=edits, rationale=why,
                          confidence=0.5)  # fmt: skip

"""Follow a Jinja variable the change renamed to the places in its file that still read the old
name.

A commit renames `{% set payment_methods = [...] %}` to `{% set methods = [...] %}` and the
first loop over it, but not the second (tried on dbt-labs/jaffle_shop_duckdb). Jinja reads the
undefined old name as empty: the model builds without the columns the loop made, and what
reads them fails (`Referenced column "credit_card_amount" not found`). The partial revert
put `payment_methods` back and passed: the rename undone, and, before this intent was read,
called fixed.

Every Jinja expression or statement of that file that reads the old name as a variable (not
an attribute `x.old`, not inside a string) reads the new one; nothing is rewritten when the
file still sets the old name, loops or takes it as a parameter (`for old in`, `macro f(old)`).
No failure message is needed: reading a variable the change stopped setting is the bug.
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.intents import change_intents
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import read_repo_file

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


class FollowJinjaVarRenameStrategy(FixIt):
    """The old name of a `{% set %}` variable the change renamed, read as the new one."""

    name: ClassVar[str] = "dbt_follow_jinja_var_rename"
    tag: ClassVar[str] = "follow_jinja_var_rename"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        edits, names = [], []
        for intent in change_intents(evidence):
            if intent.kind != "jinja_var_renamed":
                continue
            text = read_repo_file(evidence, intent.path)
            after = follow_jinja_name(text, intent.old, intent.new) if text else None
            if text is not None and after is not None:
                edits.append(derive_edit(intent.path, text, after))
                names.append(f"{intent.old} -> {intent.new}")
        if not edits or len({e.path for e in edits}) != len(edits):
            return []
        why = (
            f"the change renamed the Jinja variable {', '.join(names)} and left reads of the old "
            f"name ({', '.join(e.path for e in edits)}), which Jinja reads as empty: they read "
            "the new name, the rename kept"
        )
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=edits,
                rationale=why,
                confidence=0.9,
            )  # no `follows`: a variable's name is no column a test is named after
        ]


def follow_jinja_name(text: str, old: str, new: str) -> str | None:
    """`text` with each read of the Jinja variable `old` reading `new`; None when `old` is
    still bound in `text` (set, looped over, a macro's parameter), `new` is not set, or
    nothing reads `old`."""
    word = re.escape(old)
    bound = (
        rf"{{%-?\s*(?:set\s+{word}\b|for\s+(?:\w+\s*,\s*)*{word}\b|macro\s+\w+\s*\([^)]*\b{word}\b)"
    )
    if re.search(bound, text) or not re.search(rf"{{%-?\s*set\s+{re.escape(new)}\b", text):
        return None
    read = re.compile(rf"(?<![\w.]){word}(?!\w)")
    count = 0

    def block(match: re.Match[str]) -> str:
        nonlocal count
        out, pos = [], 0
        for string in _STRING.finditer(match.group(0)):
            plain = match.group(0)[pos : string.start()]
            out += [read.sub(new, plain), string.group(0)]
            count += len(read.findall(plain))
            pos = string.end()
        rest = match.group(0)[pos:]
        count += len(read.findall(rest))
        return "".join([*out, read.sub(new, rest)])

    after = _JINJA.sub(block, text)
    return after if count else None

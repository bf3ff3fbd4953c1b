"""Follow a docs block or a project var the breaking change renamed to every place that still
names the old one, in one candidate.

A commit renames `{% docs orders_status %}` to `{% docs order_status %}` and leaves two
properties files describing a column with `{{ doc("orders_status") }}`; or it renames the
var `payment_methods` in `dbt_project.yml` and updates one model's `var('payment_methods')`
but not another's. dbt refuses to parse (or compile), naming only the old name:

    Documentation for 'model.shop.orders' depends on doc 'orders_status'  which was not found
    Required var 'payment_methods' not found in config:

(At parse time dbt reads a missing var as None, and a `{% for %}` over it fails with
"'NoneType' object is not iterable", naming nothing: then the one var rename of the change
that the failing model itself still reads is followed.)

Putting the old name back undoes what the author meant; the diff says which name replaced
it (`patchit.patching.renames`: a block or var gone, one new of like text or the same value),
however it is spelt. Every `doc('old')` / `var('old')` inside Jinja in the project's own
files (SQL, YAML, Markdown) reads the new name; string literals elsewhere and other
packages' files are left alone. No rename of that name in the change: no candidate.
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, project_files, read_repo_file
from patchit.patching.renames import Rename, RenameKind, breaking_renames

_SUFFIXES = (".sql", ".yml", ".yaml", ".md")
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)


def follow_call(text: str, function: str, old: str, new: str) -> str:
    """`text` with `function('old'` (either quote) inside each Jinja block reading `new`."""
    call = re.compile(rf"(?P<pre>(?<![\w.]){function}\(\s*(?P<q>['\"])){re.escape(old)}(?=(?P=q))")

    def block(match: re.Match[str]) -> str:
        return call.sub(lambda m: m.group("pre") + new, match.group(0))

    return _JINJA.sub(block, text)


class _FollowNameRename(FixIt):
    """The shared shape: a missing name in the message, its rename in the change, every
    call of `function('old')` followed."""

    kind: ClassVar[RenameKind]
    follows_unnamed: ClassVar[bool] = False
    function: ClassVar[str]
    message: ClassVar[re.Pattern[str]]
    what: ClassVar[str]

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = self.message.search(error_text(evidence))
        if found is None:
            return self._unnamed(evidence)
        missing = found.group("name")
        renamed = [
            r for r in breaking_renames(evidence) if r.kind == self.kind and r.old == missing
        ]
        if len(renamed) != 1:
            return []
        return self._follow(evidence, renamed[0])

    def _unnamed(self, evidence: Evidence) -> list[PatchCandidate]:
        """A message that names no var (dbt parses a missing `var()` as None, and a loop
        over it fails with "'NoneType' object is not iterable"): the one rename of the
        change whose old name the failing unit's own file still calls."""
        if not self.follows_unnamed or evidence.unit_path is None:
            return []
        text = read_repo_file(evidence, evidence.unit_path)
        if text is None:
            return []
        renamed = [
            r for r in breaking_renames(evidence)
            if r.kind == self.kind and follow_call(text, self.function, r.old, r.new) != text
        ]  # fmt: skip
        return self._follow(evidence, renamed[0]) if len(renamed) == 1 else []

    def _follow(self, evidence: Evidence, rename: Rename) -> list[PatchCandidate]:
        edits = []
        for rel in project_files(evidence, _SUFFIXES):
            text = read_repo_file(evidence, rel)
            if text is None or rename.old not in text:
                continue
            after = follow_call(text, self.function, rename.old, rename.new)
            if after != text:
                edits.append(derive_edit(rel, text, after))
        if not edits:
            return []
        files = ", ".join(e.path for e in edits)
        why = (
            f"the breaking change renamed the {self.what} '{rename.old}' to '{rename.new}' "
            f"({rename.path}); {self.function}('{rename.old}') follows it where it is still "
            f"used ({files}) instead of undoing the rename"
        )
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=edits,
                rationale=why,
                confidence=0.9,
                follows={rename.old: rename.new},
            )
        ]


class FollowDocsRenameStrategy(_FollowNameRename):
    """`doc('old')` -> `doc('new')` after the change renamed the docs block."""

    name: ClassVar[str] = "dbt_follow_docs_rename"
    tag: ClassVar[str] = "follow_docs_rename"
    kind: ClassVar[RenameKind] = "docs"
    function: ClassVar[str] = "doc"
    what: ClassVar[str] = "docs block"
    message: ClassVar[re.Pattern[str]] = re.compile(
        r"depends on doc '(?P<name>\w+)'\s+(?:in package '[^']*'\s+)?which was not found"
    )


class FollowVarRenameStrategy(_FollowNameRename):
    """`var('old')` -> `var('new')` after the change renamed the project var."""

    name: ClassVar[str] = "dbt_follow_var_rename"
    tag: ClassVar[str] = "follow_var_rename"
    kind: ClassVar[RenameKind] = "var"
    follows_unnamed: ClassVar[bool] = True
    function: ClassVar[str] = "var"
    what: ClassVar[str] = "project var"
    message: ClassVar[re.Pattern[str]] = re.compile(r"Required var '(?P<name>\w+)' not found")

"""A misspelt macro or Jinja name -> the one near-named macro.

dbt 1.11 reports it at compile time, per node:

    Compilation Error in model stg_payments (models/staging/stg_payments.sql)
      'cents_to_dolars' is undefined. This can happen when calling a macro that does not
      exist. Check for typos and/or install package dependencies with "dbt deps".

The name is rewritten only inside Jinja blocks of the failing file; when the failing file
does not use it, the call is in a macro, and the one macro file that uses it is edited.

When the breaking change itself renamed the macro (its definition gone, one with the same
parameters and body under the new name), the new name is the fix however it is spelt, and
every call of the old name in the project follows it, package-style calls through the
project's own name (`billing.cents_to_dollars`) included. dbt words a package-style call of
a macro the namespace lacks differently, naming no macro:

    'dict object' has no attribute 'cents_to_dollars'. This can happen when calling a macro
    that does not exist. ...

That message is followed only to a rename of the change: a near name there is not read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import (
    call_pattern,
    error_text,
    project_files,
    project_name,
    project_prefix,
    read_repo_file,
    rewrite_jinja,
    scan_index,
    sub_in_regions,
    to_repo_path,
)
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.renames import Rename, breaking_renames

_UNDEFINED = re.compile(
    r"'(?P<name>\w+)' is undefined\. This can happen when calling a macro that does not exist"
)
_NO_ATTRIBUTE = re.compile(
    r"'dict object' has no attribute '(?P<name>\w+)'\. This can happen when calling a macro"
)
_NODE_PATH = re.compile(r"Compilation Error in \w+ \w+ \((?P<path>[^)]+)\)")


class FixMacroStrategy(FixIt):
    """Rename a call to an undefined macro to the single near-named macro that exists."""

    name: ClassVar[str] = "dbt_fix_macro"
    tag: ClassVar[str] = "fix_macro"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        found = _UNDEFINED.search(message) or _NO_ATTRIBUTE.search(message)
        if found is None:
            return []
        missing = found.group("name")
        known = scan_index(evidence).macros
        renamed = [
            r for r in breaking_renames(evidence)
            if r.kind == "macro" and r.old == missing and r.new in known
        ]  # fmt: skip
        if len(renamed) == 1:
            return self._follow(evidence, renamed[0])
        if found.re is _NO_ATTRIBUTE:
            return []
        fix = nearest(missing, known)
        if fix is None:
            return []
        pattern = re.compile(rf"(?<![\w.]){re.escape(missing)}(?!\w)")
        for path in self._files_to_try(evidence, message, missing):
            text = read_repo_file(evidence, path)
            if text is None:
                continue
            after, count = sub_in_regions(text, pattern, lambda _: fix, region="jinja")
            if count:
                edit = derive_edit(path, text, after)
                why = f"'{missing}' is not a macro; '{fix}' is the only near-named macro"
                review = near_name_review(evidence, [path], missing, fix, known, "macro")
                return [
                    PatchCandidate(
                        strategy=self.name,
                        tag=self.tag,
                        tier=self.tier,
                        edits=[edit],
                        rationale=why,
                        review=review,
                    )
                ]
        return []

    def _follow(self, evidence: Evidence, rename: Rename) -> list[PatchCandidate]:
        """Every call of the old name in the project's SQL: the macro is gone, so each one
        fails, and dbt reports only the nodes it compiled."""
        edits = []
        own = project_name(evidence)
        pattern = call_pattern(rename.old, (own,) if own else ())
        for rel in project_files(evidence):
            text = read_repo_file(evidence, rel)
            if text is None or rename.old not in text:
                continue
            after = rewrite_jinja(text, pattern, rename.new, None)
            if after != text:
                edits.append(derive_edit(rel, text, after))
        if not edits:
            return []
        files = ", ".join(e.path for e in edits)
        why = (
            f"the breaking change renamed the macro '{rename.old}' to '{rename.new}' "
            f"({rename.path}); the calls still using the old name follow it ({files})"
        )
        return [PatchCandidate(strategy=self.name, tag=self.tag, tier=self.tier, edits=edits,
                               rationale=why, confidence=0.9,
                               follows={rename.old: rename.new})]  # fmt: skip

    def _files_to_try(self, evidence: Evidence, message: str, missing: str) -> list[str]:
        paths = []
        if evidence.unit_path:
            paths.append(evidence.unit_path)
        if node := _NODE_PATH.search(message):
            paths.append(to_repo_path(evidence, node.group("path")))
        # Fall back to the project's macros, but only to one unambiguous file.
        root = Path(evidence.repo_root)
        macro_dir = root / project_prefix(evidence) / "macros"
        users = [
            str(p.relative_to(root))
            for p in sorted(macro_dir.rglob("*.sql"))
            if re.search(rf"\b{re.escape(missing)}\b", p.read_text(errors="replace"))
        ]
        return [*dict.fromkeys(paths), *(users if len(users) == 1 else [])]

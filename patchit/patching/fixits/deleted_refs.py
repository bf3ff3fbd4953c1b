"""A model the change deleted while others still ref() it -> its SQL inlined where it is read.

The change folds an intermediate model into the one mart it was written for and deletes it,
but another model still refs it (dbt-labs/dbt-core#2503's shape):

    Model 'model.ledger.customer_revenue' (models/marts/customer_revenue.sql) depends on a
    node named 'int_stripe__charge_details' which was not found

Restoring the file undoes the deletion (an intent: never `fixed`). This completes it: each
`{{ ref('<deleted>') }}` still in the project becomes the deleted model's own SQL, read from
the breaking diff, as a subquery under the old name (without its blank and comment lines).
The consumers compute what they did at the last good commit (the data check compares them);
the deletion, and whatever the change did to the mart that took the logic over, stay.

Where inlining cannot complete the deletion (a unit test gives `input: ref('<deleted>')`, the
diff of the model was cut), a second candidate, ranked last, restores the deleted file with
its YAML entry (`restore_deleted`): a revert of the intent, so it ends `needs_review`.
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.gitlog import split_diff
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, project_files, read_repo_file
from patchit.patching.fixits.restore_deleted import restore_candidate

_MISSING = re.compile(r"depends on a node named '(?P<name>\w+)'(?: in package '[^']*')? which was")
# `ref('x')` in its `{{ }}`, and an alias that already follows it (kept, not doubled)
_ALIAS_STOP = (r"where|group|order|left|right|inner|outer|full|cross|join|on|using|limit"
               r"|union|having|qualify|window|natural|lateral|except|intersect")  # fmt: skip
_REF_CALL = r"\{{\{{-?\s*ref\(\s*['\"]{name}['\"]\s*\)\s*-?\}}\}}"
_READS = r"ref\(\s*['\"]{name}['\"]\s*\)"  # in SQL, or a unit test's `input:` in YAML
_ALIAS = re.compile(rf"\s+(?:as\s+)?(?!(?:{_ALIAS_STOP})\b)[A-Za-z_]\w*", re.IGNORECASE)


def deleted_sql(evidence: Evidence, name: str) -> tuple[str, str] | None:
    """(path, text) of the `.sql` model `name` the breaking change deleted, read whole from
    the diff; None when the change deleted no such file or the diff of it was cut."""
    for path, part in split_diff(evidence.breaking_diff).items():
        if not path.endswith(f"/{name}.sql") and path != f"{name}.sql":
            continue
        if "\ndeleted file mode" not in part or "[... diff of this file cut]" in part:
            return None
        body = part.split("\n@@", 1)[1].split("\n", 1)[1] if "\n@@" in part else ""
        lines = [ln[1:] for ln in body.splitlines() if ln.startswith("-")]
        return (path, "\n".join(lines)) if lines else None
    return None


def inline_ref(text: str, name: str, sql: str, path: str = "") -> str:
    """`text` with each `{{ ref('name') }}` as `(<sql>) as name` (no alias added where one
    already follows). Blank and whole-line comment lines of the model are left out (the
    policy's `max_lines` counts lines), one comment says where the SQL came from."""
    kept = [ln for ln in sql.strip().splitlines() if ln.strip() and not ln.strip().startswith("--")]
    head = [f"-- {name}, deleted by the change ({path})"] if path else []
    body = "\n".join(f"        {ln}" for ln in head + kept)
    pattern = re.compile(_REF_CALL.format(name=re.escape(name)))

    def replace(match: re.Match[str]) -> str:
        aliased = _ALIAS.match(text, match.end()) is not None
        return f"(\n{body}\n    )" + ("" if aliased else f" as {name}")

    return pattern.sub(replace, text)


class InlineDeletedModelStrategy(FixIt):
    """ref() to a model the change deleted: inline its SQL in every model still reading it."""

    name: ClassVar[str] = "dbt_inline_deleted_model"
    tag: ClassVar[str] = "inline_deleted"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = _MISSING.search(error_text(evidence))
        if found is None:
            return []
        missing = found.group("name")
        reads = re.compile(_READS.format(name=re.escape(missing)))
        deleted = deleted_sql(evidence, missing)
        candidates, readers, edits = [], [], []
        for rel in project_files(evidence, (".sql", ".yml", ".yaml")):
            text = read_repo_file(evidence, rel)
            if text is None or not reads.search(text):
                continue
            readers.append(rel)
            if deleted is not None and rel.endswith(".sql"):
                after = inline_ref(text, missing, deleted[1], deleted[0])
                if after != text:
                    edits.append(derive_edit(rel, text, after))
        if edits and deleted is not None:
            files = ", ".join(e.path for e in edits)
            why = (
                f"the change deleted {deleted[0]} while {files} still ref('{missing}'): its SQL "
                "is inlined where it is read, so the deletion stays and those models compute "
                "what they did"
            )
            candidates.append(PatchCandidate(strategy=self.name, tag=self.tag, tier=self.tier,
                                             edits=edits, rationale=why,
                                             confidence=0.8))  # fmt: skip
        # ranked last: it re-creates what the change deleted (`restore_deleted`)
        restore = restore_candidate(evidence, missing, readers, self.name, self.tier)
        return candidates + ([restore] if restore is not None else [])

"""Complete new code: a CTE name mistyped where the change reads it.

A commit rewrites `from payments` as `from payment` (or adds a join on `customer_payment`)
in a model whose CTEs are `payments` and `customer_payments`. DuckDB looks the bare name up in
the catalog (`Catalog Error: Table with name payment does not exist!`), often with a "Did you
mean" naming a real table (`raw_payments`, a seed): following that message would read another
relation and may even build. Postgres says `relation "payment" does not exist`. A partial
revert restores the line but drops whatever else the change added beside it.

The fix reads the CTE the change meant: the name is rewritten to the one CTE of the same
statement it is near to, on the lines the change wrote (a bare, unqualified table reference,
not a CTE itself). A name the change wrote is judged as every near-name fix is
(`near_names.near_name_review`): a slip is taken, anything else ends in review.
"""

from __future__ import annotations

import re
from typing import ClassVar

from sqlglot import exp

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._change import rewrite_candidate, sql_unit_change
from patchit.patching.fixits._common import error_text
from patchit.patching.fixits._sqlscope import read_sql
from patchit.patching.fixits.near_names import near_name_review

# a bare table the engine does not know (DuckDB, Postgres); `cte_rename` reads these too
MISSING_TABLE = (
    re.compile(r"Table with name (?P<name>\w+) does not exist"),
    re.compile(r'relation "(?P<name>\w+)" does not exist'),
)


class FixCteNameStrategy(FixIt):
    """Read the CTE a mistyped bare table name was near, where the change wrote it."""

    name: ClassVar[str] = "sql_fix_cte_name"
    tag: ClassVar[str] = "cte_name"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        found = next((m for p in MISSING_TABLE if (m := p.search(message))), None)
        change = sql_unit_change(evidence) if found is not None else None
        if found is None or change is None:
            return []
        old = found.group("name")
        fixed = read_cte(change.now, old, change.written)
        if fixed is None:
            return []
        text, new, ctes = fixed
        why = (
            f"the change reads {old}, which is neither a relation nor a CTE of {change.path}; "
            f"{new} is the CTE it is near: read {new} there, the rest of the change kept"
        )
        candidates = rewrite_candidate(self, change, text, why, confidence=0.85)
        review = near_name_review(evidence, [change.path], old, new, ctes, kind="CTE")
        return [c.model_copy(update={"review": review}) for c in candidates]


def read_cte(text: str, old: str, written: frozenset[int]) -> tuple[str, str, list[str]] | None:
    """(text with the bare table `old` read as its near CTE, that CTE, every CTE name), or
    None: the SQL does not parse, `old` is a CTE, no single CTE is near, or the change wrote no
    line that reads `old` bare."""
    reading = read_sql(text)
    if reading is None:
        return None
    ctes = [c.alias for c in reading.tree.find_all(exp.CTE) if c.alias]
    if not ctes or old.lower() in {c.lower() for c in ctes}:
        return None
    new = nearest(old, ctes)
    if new is None:
        return None
    spans = []
    for table in reading.tree.find_all(exp.Table):
        if table.name.lower() != old.lower() or table.args.get("db") or table.args.get("catalog"):
            continue
        start, end = table.this.meta.get("start"), table.this.meta.get("end")
        if start is None or end is None or text.count("\n", 0, start) + 1 not in written:
            continue
        spans.append((start, end + 1))
    if not spans:
        return None
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text, new, ctes

"""Complete new code: a new column that the select's GROUP BY does not list.

A commit adds `plans.monthly_price_cents` to an aggregating select and leaves the GROUP BY as
it was; DuckDB refuses (`column "monthly_price_cents" must appear in the GROUP BY clause or
must be part of an aggregate function`), Postgres alike (`column "plans.monthly_price_cents"
must appear in the GROUP BY clause or be used in an aggregate function`). The change meant a
new column per group: the fix lists it in the GROUP BY, as written in the select.

Only when the change wrote the select item, the item is the bare column, aliased or not
(aggregated it would not fail; inside an expression, which of its columns to group by is a
choice), exactly one select of the file has it unaggregated beside a GROUP BY of expressions
or of positions only (`group by 1`, the jaffle shop's style: the item's position is added),
not ALL, and the column is not quoted.
"""

from __future__ import annotations

import re
from typing import ClassVar

from sqlglot import exp

from patchit.evidence.model import Evidence
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._change import rewrite_candidate, sql_unit_change
from patchit.patching.fixits._common import blank_regions, error_text
from patchit.patching.fixits._sqlscope import read_sql

_NOT_GROUPED = re.compile(r'column "(?P<col>[^"]+)" must appear in the GROUP BY clause')
_CLAUSE_END = re.compile(
    r"\b(?:having|order|limit|qualify|window|union|except|intersect|offset)\b|;", re.IGNORECASE
)


class GroupByNewColumnStrategy(FixIt):
    """List a new, unaggregated select column in its GROUP BY."""

    name: ClassVar[str] = "sql_group_by_new_column"
    tag: ClassVar[str] = "group_by_new_column"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = _NOT_GROUPED.search(error_text(evidence))
        change = sql_unit_change(evidence) if found is not None else None
        if found is None or change is None:
            return []
        fixed = add_to_group_by(change.now, found.group("col"), change.written)
        if fixed is None:
            return []
        text, column = fixed
        why = (
            f"the change added {column} to an aggregating select of {change.path} without "
            f"grouping by it: added {column} to its GROUP BY (one row per group and {column}, "
            "as the new column means)"
        )
        return rewrite_candidate(self, change, text, why, confidence=0.8)


def add_to_group_by(text: str, named: str, written: frozenset[int]) -> tuple[str, str] | None:
    """(text with `named` added to the one GROUP BY that lacks it, the column as written), or
    None (see the module docstring)."""
    reading = read_sql(text)
    if reading is None:
        return None
    qual, _, col = named.rpartition(".")
    fits = []
    for select in reading.tree.find_all(exp.Select):
        group = select.args.get("group")
        if group is None or not group.expressions:
            continue
        literals = [isinstance(g, exp.Literal) for g in group.expressions]
        positional = all(literals) and all(g.is_int for g in group.expressions)
        for position, item in enumerate(select.selects, 1):
            if isinstance(item, exp.Alias) and isinstance(item.this, exp.Column):
                item = item.this  # `status as latest_status`: the column is still bare
            if not (isinstance(item, exp.Column) and item.name.lower() == col.lower()):
                continue
            if qual and item.table.lower() != qual.lower():
                continue
            if item.this.quoted or (any(literals) and not positional):
                return None
            start = (item.args["table"] if item.table else item.this).meta.get("start")
            end = item.this.meta.get("end")
            if start is None or end is None:
                return None
            if text.count("\n", 0, start) + 1 not in written:
                continue
            column = text[start : end + 1]
            fits.append((group, column, str(position) if positional else column))
    if len(fits) != 1:
        return None
    group, column, entry = fits[0]
    tail = group.expressions[-1]
    last = [i.meta["start"] for i in [tail, *tail.find_all(exp.Identifier)] if "start" in i.meta]
    if not last:
        return None
    at = _clause_end(blank_regions(text), max(last))
    if at is None:
        return None
    return text[:at] + f", {entry}" + text[at:], column


def _clause_end(masked: str, pos: int) -> int | None:
    """The end of the GROUP BY list whose last expression starts at `pos` (`masked`: Jinja,
    strings and comments blanked): the next clause at paren depth 0, the closing paren of an
    enclosing subquery, or the end of the text."""
    depth = 0
    i = pos
    while i < len(masked):
        char = masked[i]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and _CLAUSE_END.match(masked, i) and not _word_before(masked, i):
            break
        i += 1
    while i > pos and masked[i - 1].isspace():
        i -= 1
    return i if i > pos else None


def _word_before(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")

"""Complete new code: qualify a column that the change's new join made ambiguous.

A select read `country` from one relation; the commit joins a second relation that has a
`country` too, and the bare name no longer binds (DuckDB: `Ambiguous reference to column name
"country" (use: 'invoices.country' or 'accounts.country')`; Postgres: `column reference
"country" is ambiguous`). The author meant the join, not a new meaning of `country`: the fix
qualifies each bare `country` of that select with the relation it came from before the
change.

Read from the file before and after the change (sqlglot, at the raw file's offsets): before,
the select that read the bare name had one relation; after, the same select (the one whose
relations include that relation, under whatever name it now has) has more. Exactly one such
select and one qualifier, no select alias of that name, no quoted name; DuckDB's own `use:`
list, when given, must name the qualifier.
"""

from __future__ import annotations

import re
from typing import ClassVar

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from patchit.evidence.model import Evidence
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._change import rewrite_candidate, sql_unit_change
from patchit.patching.fixits._common import error_text
from patchit.patching.fixits._sqlscope import Reading, read_sql

_AMBIGUOUS = [
    re.compile(r'Ambiguous reference to column name "(?P<col>[^"]+)"(?: \(use: (?P<use>[^)]*)\))?'),
    re.compile(r'column reference "(?P<col>[^"]+)" is ambiguous'),
]


def _identity(source: object) -> str | None:
    """What a select reads, independent of its alias: a table's name, a CTE's name."""
    if isinstance(source, exp.Table):
        return f"table:{source.name.lower()}"
    if isinstance(source, Scope) and isinstance(source.expression.parent, exp.CTE):
        return f"cte:{source.expression.parent.alias_or_name.lower()}"
    return None


def _bare(reading: Reading, col: str) -> dict[int, tuple[Scope, list[exp.Column]]]:
    """{id(scope): (scope, its unqualified references to `col`)}."""
    found: dict[int, tuple[Scope, list[exp.Column]]] = {}
    for column in reading.tree.find_all(exp.Column):
        if column.table or column.name.lower() != col or isinstance(column.this, exp.Star):
            continue
        scope = reading.scope_of(column)
        if scope is not None:
            found.setdefault(id(scope), (scope, []))[1].append(column)
    return found


def _sources(scope: Scope) -> dict[str, object]:
    return {name: src for name, (_node, src) in scope.selected_sources.items()}


class QualifyAmbiguousStrategy(FixIt):
    """Qualify a bare column with the relation it came from before the change's new join."""

    name: ClassVar[str] = "sql_qualify_ambiguous_column"
    tag: ClassVar[str] = "qualify_ambiguous"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        found = next((m for p in _AMBIGUOUS if (m := p.search(message))), None)
        change = sql_unit_change(evidence) if found is not None else None
        if found is None or change is None or change.before is None:
            return []
        use = found.groupdict().get("use") or ""
        fixed = qualify(change.before, change.now, found.group("col"), use)
        if fixed is None:
            return []
        text, qualifier, count = fixed
        col = found.group("col")
        why = (
            f"the change joined a relation that also has {col}, so the bare {col} no longer "
            f"binds; before the change it came from {qualifier}: qualified it as "
            f"{qualifier}.{col} ({count} reference(s) in {change.path})"
        )
        return rewrite_candidate(self, change, text, why, confidence=0.85)


def qualify(before: str, now: str, col: str, use: str = "") -> tuple[str, str, int] | None:
    """(now with the bare `col` qualified, the qualifier, how many), or None (see the module
    docstring)."""
    col = col.lower()
    was, reading = read_sql(before), read_sql(now)
    if was is None or reading is None:
        return None
    origins = set()
    for scope, _columns in _bare(was, col).values():
        only = list(_sources(scope).values())
        if len(only) != 1 or (identity := _identity(only[0])) is None:
            return None
        origins.add(identity)
    fits = []
    for scope, columns in _bare(reading, col).values():
        sources = _sources(scope)
        if len(sources) < 2:
            continue
        names = [name for name, src in sources.items() if _identity(src) in origins]
        if len(names) != 1:
            return None
        fits.append((scope, columns, names[0]))
    if len(fits) != 1:
        return None
    scope, columns, qualifier = fits[0]
    assert isinstance(scope.expression, exp.Select)
    for projection in scope.expression.selects:
        if projection.alias_or_name.lower() == col and not isinstance(projection, exp.Column):
            return None  # a select alias of that name: a bare reference may mean it
    if use and f"{qualifier}.{col}".lower() not in use.lower():
        return None
    out = now
    for column in sorted(columns, key=lambda c: -int(c.this.meta.get("start", -1))):
        start = column.this.meta.get("start")
        if start is None or column.this.quoted or out[start : start + len(col)].lower() != col:
            return None
        out = out[:start] + f"{qualifier}." + out[start:]
    return out, qualifier, len(columns)

"""Where a consumer's SQL reads a renamed column of one model, and the text that reads the new
name instead while keeping the consumer's own outputs.

Every column reference named `old` is resolved through the consumer's scopes (sqlglot, at
the raw file's offsets: `_sqlscope`): a qualified `t.old` whose `t` reaches the renamed
model (directly or through `select *` of CTEs and subqueries), or an unqualified `old`
whose only source with that name is the model. Each such reference reads `new`; a reference
that is a whole select item reads `new as old` (`t.new as old`), so the consumer's output
columns, and everything downstream of it, keep their names and values.

It refuses (a `Refusal` naming why) rather than guess: `old` inside Jinja or quoted, a
`using (old)` join, a `* exclude (old)`, a select alias `old` that a bare `old` might mean,
a reference both the model and another relation could answer, or an output `*` that would
pass the new name on to the consumer's own downstream, unless the caller follows the rename
on through that consumer (`passed_on`, `pass_on`: jaffle-shop's `orders` selects `orders.*`
from `stg_orders`, so a column `stg_orders` renames reaches `customers` under its new name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from patchit.patching.fixits._sqlscope import (
    Columns,
    Reading,
    exposes,
    is_star,
    jinja_blocks,
    output_scopes,
    read_sql,
    sql_call,
    star_sources,
)

_STAR = re.compile(r"(?:\bselect|\bdistinct|,)\s*(?:\w+\s*\.\s*)?\*", re.IGNORECASE)


@dataclass(frozen=True)
class Refusal:
    reason: str


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])", re.IGNORECASE)


def passed_on(text: str, model: str, renames: dict[str, str], columns: Columns) -> set[str]:
    """The renamed columns (old names, lower case) of `model` that `text`'s output `*` passes on
    to its own downstream, so that its consumers read them under the new name (none when its
    SQL does not parse: `follow_in_sql` then refuses)."""
    if not _STAR.search(text):
        return set()
    reading = read_sql(text)
    if reading is None:
        return set()
    found = set()
    for scope in output_scopes(reading):
        select = scope.expression
        for star in select.selects if isinstance(select, exp.Select) else []:
            if not is_star(star):
                continue
            for old in renames:
                if any(exposes(s, old.lower(), model.lower(), columns) == "target"
                       for s in star_sources(scope, star)):  # fmt: skip
                    found.add(old.lower())
    return found


def follow_in_sql(
    text: str,
    model: str,
    renames: dict[str, str],
    columns: Columns,
    pass_on: frozenset[str] = frozenset(),
) -> str | Refusal:
    """`text` reading each renamed column of `model` by its new name (unchanged when it reads
    none of them), or why it cannot be done with confidence. `columns` answers for the model
    with its columns before the change; `pass_on`: the old names the caller lets the output
    `*` pass on under the new name (it follows them on into this model's consumers)."""
    star = bool(_STAR.search(text))  # a `select *` may pass the column on without naming it
    wanted = {old.lower(): new for old, new in renames.items() if star or _word(old).search(text)}
    if not wanted:
        return text
    opened = set()
    for block in jinja_blocks(text):
        for old in wanted:
            if not _word(old).search(block.group(0)):
                continue
            if not sql_call(block.group(0)):  # a macro on SQL strings is read as that SQL
                return Refusal(f"{old} is named inside Jinja ({block.group(0)[:60]!r})")
            opened.add(block.start())
    reading = read_sql(text, frozenset(opened))
    if reading is None:
        return Refusal("its SQL does not parse")
    spans: list[tuple[int, int, str]] = []
    for old, new in wanted.items():
        found = _sites(reading, text, model.lower(), old, new, columns, old in pass_on)
        if isinstance(found, Refusal):
            return found
        spans += found
    out = text
    for start, end, replacement in sorted(spans, reverse=True):
        out = out[:start] + replacement + out[end:]
    return out


def _sites(
    reading: Reading, text: str, model: str, old: str, new: str, columns: Columns, passes: bool
) -> list[tuple[int, int, str]] | Refusal:
    for ident in reading.tree.find_all(exp.Identifier):
        if ident.quoted and ident.name.lower() == old:
            return Refusal(f'"{old}" is a quoted identifier')
    for join in reading.tree.find_all(exp.Join):
        if any(u.name.lower() == old for u in join.args.get("using") or []):
            return Refusal(f"a join USING ({old})")
    for scope in [] if passes else output_scopes(reading):
        select = scope.expression
        for star in select.selects if isinstance(select, exp.Select) else []:
            if is_star(star) and any(
                exposes(s, old, model, columns) == "target" for s in star_sources(scope, star)
            ):
                return Refusal(f"its output * passes {model}.{old} on to its own downstream")
    spans = []
    for column in reading.tree.find_all(exp.Column):
        if column.name.lower() != old or isinstance(column.this, exp.Star):
            continue
        found = reading.scope_of(column)
        if found is None or not isinstance(found.expression, exp.Select):
            return Refusal(f"a reference to {old} outside any select it can read")
        origin = _origin(found, column, old, model, columns)
        if isinstance(origin, Refusal):
            return origin
        if origin != "target":
            continue
        ident = column.this
        start, end = ident.meta.get("start"), ident.meta.get("end")
        if start is None or end is None or text[start : end + 1].lower() != old:
            return Refusal(f"the reference to {old} is not where the parser says")
        written = text[start : end + 1]
        whole = column.parent is found.expression and column in found.expression.selects
        spans.append((start, end + 1, f"{new} as {written}" if whole else new))
    return spans


def _origin(
    scope: Scope, column: exp.Column, old: str, model: str, columns: Columns
) -> str | Refusal:
    assert isinstance(scope.expression, exp.Select)
    sources = {name.lower(): src for name, (_n, src) in scope.selected_sources.items()
               if isinstance(src, exp.Table | Scope)}  # fmt: skip
    if column.table:
        source = sources.get(column.table.lower())
        if source is None:
            return "absent"  # an outer scope's alias (a correlated subquery): left alone
        origin = exposes(source, old, model, columns)
        if origin == "unknown":
            return Refusal(f"cannot tell what {column.table}.{old} reads")
        return origin
    origins = [exposes(src, old, model, columns) for src in sources.values()]
    if "target" in origins and "other" in origins:
        return Refusal(f"{old} could come from {model} or another relation")
    # `sum(old) as old`: outside ORDER BY, a name the model had binds to the model's column
    # before the select's own alias (DuckDB, Postgres); in ORDER BY, to the alias
    by_alias = "target" not in origins or column.find_ancestor(exp.Order) is not None
    for projection in scope.expression.selects:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if (
            by_alias
            and projection.alias_or_name.lower() == old
            and not (isinstance(inner, exp.Column) and inner.name.lower() == old)
        ):
            return Refusal(f"a select alias {old} that a bare {old} may mean")
    # the query bound before the change: a bare name the model had was the model's
    return "target" if "target" in origins else "absent"

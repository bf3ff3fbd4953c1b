"""SQL read through a parser (sqlglot, DuckDB dialect), not regular expressions.

Every reader returns None when the text does not parse, so each caller keeps its own
fallback for exactly that case. The compiled SQL of a dbt node is plain SQL; a model's raw
Jinja-SQL parses once its Jinja is masked (`mask_jinja`).

- `relations(sql)`: the base relations a statement reads (CTE names are not relations).
- `resolve_alias(sql, alias, column, lookup)`: what an alias in a qualified column stands
  for: the columns it exposes (through CTEs, subqueries and `*`, recursively) and the base
  relations it reads, with `lookup` giving a base relation's real columns (the warehouse).
- `renamed_columns(sql)`: `old as new` projections of the outermost select.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from patchit.evidence.model import ProjectIndex

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_MAX_DEPTH = 32


def mask_jinja(text: str) -> str:
    """Raw Jinja-SQL as parseable SQL: an expression block inside SQL becomes a placeholder
    identifier; a block alone on its line (`{{ config(...) }}`), a statement or a comment
    block becomes blank (both branches of an `if` stay)."""

    def one(match: re.Match[str]) -> str:
        head = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        tail_end = text.find("\n", match.end())
        tail = text[match.end() : tail_end if tail_end >= 0 else len(text)]
        alone = not head.strip() and not tail.strip()
        return "__jinja__" if match.group(0).startswith("{{") and not alone else " "

    return _JINJA.sub(one, text)


def parse(sql: str) -> exp.Expr | None:
    """The statement's tree (DuckDB dialect), or None when it does not parse."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except (SqlglotError, RecursionError, ValueError):
        return None
    return tree


def _scopes(tree: exp.Expr) -> list[Scope] | None:
    try:
        return list(traverse_scope(tree))
    except (SqlglotError, RecursionError, ValueError):
        return None


@dataclass(frozen=True)
class Relation:
    """A base relation a statement reads: its identifier and, when qualified, its schema."""

    name: str
    schema: str = ""
    catalog: str = ""


def relations(sql: str) -> list[Relation] | None:
    """Base relations read, in order of first appearance; None when the SQL does not parse."""
    tree = parse(sql)
    if tree is None:
        return None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found: dict[tuple[str, str, str], Relation] = {}
    tables = sorted(tree.find_all(exp.Table), key=lambda t: int(t.this.meta.get("start", 0)))
    for table in tables:
        if not table.name or not isinstance(table.this, exp.Identifier):
            continue  # a table function (read_csv(...)) or a placeholder
        if not table.db and table.name.lower() in ctes:
            continue
        rel = Relation(table.name, table.db, table.catalog)
        found.setdefault((rel.name.lower(), rel.schema.lower(), rel.catalog.lower()), rel)
    return list(found.values())


@dataclass
class AliasSource:
    """What an alias stands for: the columns it exposes and the base relations it reads."""

    columns: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    complete: bool = True  # False when a `*` over a base relation had no known columns


def _same(a: str | None, b: str | None) -> bool:
    return (a or "").lower() == (b or "").lower()


def _source(scope: Scope, alias: str) -> exp.Table | Scope | None:
    for name, (_node, source) in scope.selected_sources.items():
        if _same(name, alias) and isinstance(source, exp.Table | Scope):
            return source
    return None


def _excluded(star: exp.Expression) -> set[str]:
    names = star.args.get("except_") or star.args.get("except") or []
    return {n.name.lower() for n in names if isinstance(n, exp.Expression)}


def _expose(
    source: exp.Table | Scope,
    lookup: Callable[[str], list[str] | None],
    out: AliasSource,
    depth: int = 0,
) -> list[str]:
    """The columns `source` exposes; base relations reached are added to `out.tables`."""
    if isinstance(source, exp.Table):
        name = source.name.lower()
        if name not in out.tables:
            out.tables.append(name)
        known = lookup(name)
        if known is None:
            out.complete = False
        return list(known or [])
    if depth > _MAX_DEPTH:
        out.complete = False
        return []
    if source.set_operation_scopes:  # a set operation's columns are its first branch's
        return _expose(source.set_operation_scopes[0], lookup, out, depth + 1)
    select = source.expression
    if not isinstance(select, exp.Select):
        out.complete = False
        return []
    columns: list[str] = []
    for projection in select.selects:
        if isinstance(projection, exp.Star):
            inner = [s for _n, (_x, s) in source.selected_sources.items()]
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            one = _source(source, projection.table)
            inner = [one] if one is not None else []
            projection = projection.this
        else:
            columns.append(projection.alias_or_name)
            continue
        dropped = _excluded(projection)
        for src in inner:
            if isinstance(src, exp.Table | Scope):
                columns += [
                    c for c in _expose(src, lookup, out, depth + 1) if c.lower() not in dropped
                ]
    return list(dict.fromkeys(columns))


def resolve_alias(
    sql: str,
    alias: str,
    column: str | None = None,
    lookup: Callable[[str], list[str] | None] | None = None,
) -> AliasSource | None:
    """What `alias` (as in `alias.column`) stands for in `sql`; None when the SQL does not
    parse or no select reads a relation under that alias.

    The select chosen is the one that references `alias.column`, else the outermost one
    that has the alias. Names compare case-insensitively, as DuckDB's do (quoted too).
    """
    tree = parse(sql)
    scopes = _scopes(tree) if tree is not None else None
    if not scopes:
        return None
    having = [s for s in scopes if _source(s, alias) is not None]
    if not having:
        return None
    chosen = having[-1]
    if column is not None:
        chosen = next(
            (
                s
                for s in having
                if any(_same(c.table, alias) and _same(c.name, column) for c in s.columns)
            ),
            chosen,
        )
    source = _source(chosen, alias)
    assert source is not None
    out = AliasSource()
    out.columns = _expose(source, lookup or (lambda _name: None), out)
    return out


def renamed_columns(sql: str) -> dict[str, str] | None:
    """{old: new} for each `old as new` (a plain column renamed) that the outermost select
    projects; None when the SQL does not parse."""
    tree = parse(sql)
    if tree is None:
        return None
    select: exp.Expr = tree
    while isinstance(select, exp.SetOperation):
        select = select.left
    if not isinstance(select, exp.Select):
        return {}
    found: dict[str, str] = {}
    for projection in select.selects:
        if isinstance(projection, exp.Alias) and isinstance(projection.this, exp.Column):
            old, new = projection.this.name, projection.alias
            if old and new and old != "__jinja__" and not _same(old, new):
                found.setdefault(old, new)
    return found


def dbt_refs(
    compiled: str, index: ProjectIndex, own: str | None = None
) -> tuple[list[str], list[tuple[str, str]]] | None:
    """The ref() names and source() pairs a node's compiled SQL reads, by matching its base
    relations to the project's models, seeds, snapshots and source tables; None when the SQL
    does not parse or a relation matches nothing (an aliased model, say): the caller then
    reads the raw Jinja instead. `own` (the node itself, read by an incremental) is left out."""
    found = relations(compiled)
    if found is None:
        return None
    nodes = {n.lower(): n for n in [*index.models, *index.seeds, *index.snapshots]}
    refs: list[str] = []
    sources: list[tuple[str, str]] = []
    for rel in found:
        name = rel.name.lower()
        if own is not None and name == own.lower():
            continue
        tables = [s for s in index.sources if s[1].lower() == name]
        if rel.schema and (len(tables) > 1 or name in nodes):  # the source's schema decides
            tables = [s for s in tables if s[0].lower() == rel.schema.lower()]
        if len(tables) == 1:
            sources.append(tables[0])
        elif name in nodes:
            refs.append(nodes[name])
        else:
            return None
    return list(dict.fromkeys(refs)), list(dict.fromkeys(sources))


def projections(sql: str) -> dict[str, str] | None:
    """{output column: its expression's SQL} of the outermost select (a set operation's first
    branch); None when the SQL does not parse. `*` items are left out."""
    tree = parse(sql)
    if tree is None:
        return None
    select: exp.Expr = tree
    while isinstance(select, exp.SetOperation):
        select = select.left
    if not isinstance(select, exp.Select):
        return {}
    found: dict[str, str] = {}
    for projection in select.selects:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Star) or (
            isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)
        ):
            continue
        try:
            text = inner.sql(dialect="duckdb").lower()
        except RecursionError:  # parsed, but too deep for sqlglot's generator
            return None
        found.setdefault(projection.alias_or_name.lower(), text)
    return found


def renamed_between(before: str, after: str, old: str) -> str | None:
    """The new output name of `old` when a model's outermost select computed it from the same
    expression before and after (`upper(country) as country` -> `... as country_code`) and
    `old` is gone; None when nothing (or more than one name) matches, or either side fails
    to parse."""
    was, now = projections(before), projections(after)
    if not was or now is None or old.lower() not in was or old.lower() in now:
        return None
    same = [name for name, expr in now.items() if expr == was[old.lower()] and name not in was]
    return same[0] if len(same) == 1 else None

"""Where a qualified column's alias reads from, for the column fix-it.

`alias_columns` parses the node's compiled SQL (sqlglot): the alias resolves through CTEs,
subqueries and `*` to base relations, whose real columns come from the evidence's upstream
relations (read from the warehouse snapshot). Only when the compiled SQL is missing or does
not parse does it fall back to the raw file's `ref('x') }} as alias` by regex.

`upstream_rename` finds the new name of a column an upstream model now selects as
`old as new`, or computes under a new name in the breaking change (`f(x) as old` became
`f(x) as new`); `is_projection` tells whether a span of SQL is a whole select item, where a
rename must keep the model's output column name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from patchit.evidence.model import Evidence
from patchit.evidence.sql_parse import mask_jinja, renamed_between, renamed_columns, resolve_alias
from patchit.patching.fixits._common import model_files, read_repo_file
from patchit.patching.revert import read_breaking_change

_REF_ALIAS = r"ref\(\s*['\"](?P<ref>\w+)['\"]\s*\)\s*\}\}\s*(?:as\s+)?"
_TOKEN = re.compile(r"\w+|\S")
_CLAUSES = frozenset(
    {"select", "from", "where", "by", "having", "on", "qualify", "window", "limit", "join"}
    | {"using", "values", "returning", "set", "when", "then", "else", "over", "partition"}
)


@dataclass
class AliasColumns:
    """The columns an alias exposes and the base relations it reads (by identifier)."""

    columns: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    parsed: bool = True  # False: found by the regex fallback


def _identifier(name: str, relation: str | None) -> str:
    return (relation or name).rsplit(".", 1)[-1].strip('"').lower()


def _lookup(evidence: Evidence, table: str) -> list[str] | None:
    for rel in evidence.upstream:
        if _identifier(rel.name, rel.relation) == table.lower() and rel.columns:
            return list(rel.columns)
    return None


def alias_columns(evidence: Evidence, raw: str, alias: str | None, column: str) -> AliasColumns:
    """What `alias` (None: any relation) exposes; every upstream column when unresolved."""
    everything = AliasColumns(
        columns=[c for r in evidence.upstream for c in r.columns],
        tables=[_identifier(r.name, r.relation) for r in evidence.upstream],
        parsed=False,
    )
    if alias is None:
        return everything
    if evidence.compiled_code:
        found = resolve_alias(evidence.compiled_code, alias, column, lambda t: _lookup(evidence, t))
        if found is not None:
            return AliasColumns(columns=found.columns, tables=found.tables)
    refs = {m.group("ref") for m in re.finditer(_REF_ALIAS + re.escape(alias) + r"\b", raw)}
    aliased = [r for r in evidence.upstream if r.name in refs]
    if not aliased:
        return everything
    return AliasColumns(
        columns=[c for r in aliased for c in r.columns],
        tables=[_identifier(r.name, r.relation) for r in aliased],
        parsed=False,
    )


def upstream_rename(
    evidence: Evidence, tables: list[str], old: str, columns: list[str]
) -> tuple[str, str] | None:
    """(model, new) when exactly one upstream model the alias reads selects `old as new`,
    with `new` among the columns the alias really has (when those are known)."""
    files = model_files(evidence)
    known = {c.lower() for c in columns}
    paths = {p: table for table in tables for name, p in files.items() if name.lower() == table}
    found: set[tuple[str, str]] = set()
    for path, table in paths.items():
        text = read_repo_file(evidence, path)
        renames = renamed_columns(mask_jinja(text)) if text else None
        for source, new in (renames or {}).items():
            if source.lower() == old.lower() and (not known or new.lower() in known):
                found.add((table, new))
    if not found and paths:  # an expression renamed: `f(x) as old` became `f(x) as new`
        change = read_breaking_change(evidence)
        for file in change.files if change is not None else []:
            if file.path in paths:
                before, after = mask_jinja(file.base_text), mask_jinja(file.fail_text)
                now = renamed_between(before, after, old)
                if now is not None and (not known or now.lower() in known):
                    found.add((paths[file.path], now))
    return next(iter(found)) if len(found) == 1 else None


def is_projection(masked: str, start: int, end: int) -> bool:
    """Whether masked[start:end] is a whole item of a select list (not in GROUP BY, a call,
    an expression). `masked` has its Jinja, strings and comments blanked."""
    after = _TOKEN.search(masked, end)
    if after is not None and after.group(0).lower() not in (",", "from", ")"):
        return False
    before = _TOKEN.findall(masked, 0, start)
    if not before or before[-1].lower() not in (",", "select", "distinct", "all"):
        return False
    depth = 0
    for token in reversed(before):
        word = token.lower()
        if word == ")":
            depth += 1
        elif word == "(":
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0 and word in _CLAUSES:
            return bool(word == "select")
    return False

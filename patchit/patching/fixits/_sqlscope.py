"""Jinja-SQL read through sqlglot at the raw file's own offsets, for fix-its that edit columns.

`patchit.evidence.sql_parse.mask_jinja` turns every `{{ ... }}` into one placeholder, which
parses but moves every later token and hides which model a `{{ ref('x') }}` reads. The
fix-its that complete a change must edit the raw text at the exact spot of a column, and
must know which relation each column comes from, so here each Jinja block is masked in place
(same length, same lines): `{{ ref('m') }}` becomes the identifier `m`, any other expression
the placeholder `_j` (`_jjj...` over its whole width when it is glued to a name, as in
`{{ method }}_amount`, so the name stays one identifier; `masked` tells either), a statement
or comment block (or an expression alone on its line) blanks. sqlglot's identifier offsets
are then offsets into the raw file.

`exposes` answers, for a relation a scope selects from, whether a column name reaches it
from one target model (through `*` of CTEs and subqueries), from elsewhere, not at all, or
unknown; `Columns` gives a base relation's column names (None: not known).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from patchit.evidence.sql_parse import parse

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_REF = re.compile(r"\{\{-?\s*ref\(\s*(?:'(?P<a>\w+)'|\"(?P<b>\w+)\")\s*\)\s*-?\}\}")
_MAX_DEPTH = 24
PLACEHOLDER = "_j"
_GLUED = re.compile(r"\w")

Columns = Callable[[str], set[str] | None]
Origin = Literal["target", "other", "absent", "unknown"]


# `{{ cents_to_usd('sum(amount)') }}`, `{{ billing.to_dollars("x", 2) }}`: a macro called on SQL
# written as string literals (dbt's own style for money and date macros)
_LITERAL = r"'[^'\\{}]*'" + "|" + r'"[^"\\{}]*"'
_SQL_CALL = re.compile(
    rf"\{{\{{-?\s*(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\((?P<args>\s*(?:{_LITERAL})"
    rf"(?:\s*,\s*(?:{_LITERAL}|\d+))*\s*)\)\s*-?\}}\}}"
)


def jinja_blocks(text: str) -> list[re.Match[str]]:
    return list(_JINJA.finditer(text))


# dbt's own functions whose string arguments name things (a model, a var, a doc), not SQL
_NAMES_NOT_SQL = {"ref", "source", "var", "env_var", "doc", "config", "log", "print",
                  "return", "run_query", "statement", "load_result", "dispatch", "metric",
                  "graph"}  # fmt: skip


def sql_call(block: str) -> bool:
    """Whether a Jinja block is a macro called on SQL in string literals (`_SQL_CALL`)."""
    found = _SQL_CALL.fullmatch(block)
    return found is not None and found.group("name").split(".")[-1] not in _NAMES_NOT_SQL


def _open_call(block: str) -> str:
    """A `sql_call` block as the SQL call it stands for, at the same offsets: braces and quotes
    blank, the macro's name an identifier (`billing_to_dollars`), the literals' SQL as is
    (`{{ cents_to_usd('sum(x)') }}` -> `   cents_to_usd( sum(x) )   `)."""
    found = _SQL_CALL.fullmatch(block)
    assert found is not None
    chars = ["\n" if c == "\n" else " " for c in block]
    for i in range(*found.span("name")):
        chars[i] = "_" if block[i] == "." else block[i]
    chars[found.end("name")], chars[found.end("args")] = "(", ")"
    quote = ""
    for i in range(*found.span("args")):
        c = block[i]
        if quote:
            quote = "" if c == quote else quote
            chars[i] = " " if not quote else c
        elif c in "'\"":
            quote = c
        else:
            chars[i] = c  # commas, numbers, blanks between the arguments
    return "".join(chars)


def mask_in_place(text: str, opened: frozenset[int] = frozenset()) -> str:
    """`text` with its Jinja masked at the same offsets (see the module docstring); the
    `sql_call` blocks starting at an offset in `opened` are read as the SQL they call."""

    def one(match: re.Match[str]) -> str:
        block = match.group(0)
        if match.start() in opened and sql_call(block):
            return _open_call(block)
        blank = re.sub(r"[^\n]", " ", block)
        if ref := _REF.fullmatch(block):
            name = ref.group("a") or ref.group("b")
            return name + blank[len(name) :]
        if not block.startswith("{{"):
            return blank
        head = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        tail_end = text.find("\n", match.end())
        tail = text[match.end() : tail_end if tail_end >= 0 else len(text)]
        alone = not head.strip() and not tail.strip()
        if alone:
            return blank
        if _GLUED.match(tail) or _GLUED.match(head[-1:]):  # `{{ m }}_amount`: one identifier
            return PLACEHOLDER + "j" * (len(block) - len(PLACEHOLDER))
        return PLACEHOLDER + blank[len(PLACEHOLDER) :]

    return _JINJA.sub(one, text)


@dataclass
class Reading:
    """A parsed statement, its scopes, and which scope each select belongs to."""

    masked: str
    tree: exp.Expr
    scopes: list[Scope]

    def scope_of(self, node: exp.Expr) -> Scope | None:
        """The scope whose own select holds `node` (the nearest enclosing one)."""
        by_select = {id(s.expression): s for s in self.scopes}
        current: exp.Expr | None = node.parent
        while current is not None:
            if id(current) in by_select:
                return by_select[id(current)]
            current = current.parent
        return None


def read_sql(text: str, opened: frozenset[int] = frozenset()) -> Reading | None:
    """The raw Jinja-SQL parsed at its own offsets; None when it does not parse. `opened`: see
    `mask_in_place`."""
    masked = mask_in_place(text, opened)
    tree = parse(masked)
    if tree is None:
        return None
    try:
        scopes = list(traverse_scope(tree))
    except (SqlglotError, RecursionError, ValueError):
        return None
    return Reading(masked, tree, scopes) if scopes else None


def masked(name: str) -> bool:
    """Whether an identifier holds masked Jinja (`_j`, or a name glued to `_jjj...`)."""
    return PLACEHOLDER in name


def is_star(projection: exp.Expr) -> bool:
    return isinstance(projection, exp.Star) or (
        isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
    )


def _excluded(star: exp.Expr) -> set[str]:
    inner = star.this if isinstance(star, exp.Column) else star
    names = inner.args.get("except_") or inner.args.get("except") or []
    return {n.name.lower() for n in names if isinstance(n, exp.Expr)}


def star_sources(scope: Scope, star: exp.Expr) -> list[exp.Table | Scope]:
    """The relations a `*` (every source) or `t.*` (one) of `scope`'s select reads."""
    if isinstance(star, exp.Column):
        found = [s for name, (_n, s) in scope.selected_sources.items()
                 if name.lower() == star.table.lower()]  # fmt: skip
    else:
        found = [s for _name, (_n, s) in scope.selected_sources.items()]
    return [s for s in found if isinstance(s, exp.Table | Scope)]


def _combine(origins: list[Origin]) -> Origin:
    if "target" in origins:
        return "unknown" if "other" in origins else "target"
    kind: Origin
    for kind in ("other", "unknown"):
        if kind in origins:
            return kind
    return "absent"


def exposes(
    source: exp.Table | Scope, name: str, target: str, columns: Columns, depth: int = 0
) -> Origin:
    """Where `name` (lower case) comes from when read from `source`: the model `target`
    (through `*` only: a select that names the column itself owns it), another relation,
    nowhere, or unknown."""
    if isinstance(source, exp.Table):
        known = columns(source.name.lower())
        if known is None:
            return "unknown"
        if name not in known:
            return "absent"
        return "target" if source.name.lower() == target else "other"
    if depth > _MAX_DEPTH:
        return "unknown"
    if source.set_operation_scopes:
        return exposes(source.set_operation_scopes[0], name, target, columns, depth + 1)
    select = source.expression
    if not isinstance(select, exp.Select):
        return "unknown"
    origins: list[Origin] = []
    for projection in select.selects:
        if not is_star(projection):
            if projection.alias_or_name.lower() == name:
                return "other"
            continue
        if name in _excluded(projection):
            continue
        origins += [exposes(s, name, target, columns, depth + 1)
                    for s in star_sources(source, projection)]  # fmt: skip
    return _combine(origins)


def output_scopes(reading: Reading) -> list[Scope]:
    """The scopes whose select list is the statement's output (the root select, or each
    branch of a root set operation)."""
    root = reading.scopes[-1]
    if root.set_operation_scopes:
        found: list[Scope] = []
        stack = list(root.set_operation_scopes)
        while stack:
            scope = stack.pop(0)
            if scope.set_operation_scopes:
                stack = list(scope.set_operation_scopes) + stack
            else:
                found.append(scope)
        return found
    return [root]

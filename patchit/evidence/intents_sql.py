"""What a change meant in a dbt model's SQL, read through sqlglot: the intents of one file.

A model's Jinja-SQL is rendered just enough to parse: `{{ ref('x') }}` becomes `x`,
`{{ source('s', 't') }}` becomes `s.t`, any other expression block becomes a placeholder
named after its text (two different macro calls stay different), and a block alone on its
line, a statement or a comment becomes blank, as `sql_parse.mask_jinja` does.

Each select of the file (the outermost one, scope "", and every CTE, scope its name) is
read into a `Scope`: its output columns and their expressions, the relations it joins, its
filters. Comparing the scopes before and after the change gives:

- a column renamed: an output gone and a new one computed from the same expression
  (`plan_code` -> `plan_code as plan_id`, `upper(country) as country` -> `... as country_code`);
- a column added or removed; a join or a CTE added; a CTE renamed (same body, new name);
- a type changed (`cast(x as int)` -> `cast(x as bigint)` under one output name, or a cast
  added to or taken off it);
- a literal changed (the same expression or filter with other constants).

Slips are not intents: whitespace and comments do not reach the parser; an output replaced
by one whose name is a near spelling of it and whose expression differs (`amount` ->
`amout`) is a typo of an unchanged name; a file that does not parse after the change (a
dropped comma) has no SQL intents.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field

from sqlglot import exp

from patchit.evidence.sql_parse import parse

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_REF = re.compile(r"\{\{-?\s*ref\(\s*(?:['\"][^'\"]+['\"]\s*,\s*)?['\"](?P<name>[^'\"]+)['\"]"
                  r"\s*(?:,[^)]*)?\)\s*-?\}\}")  # fmt: skip
_SOURCE = re.compile(
    r"\{\{-?\s*source\(\s*['\"](?P<src>[^'\"]+)['\"]\s*,\s*['\"](?P<table>[^'\"]+)['\"]\s*\)\s*-?\}\}"
)
TYPO_RATIO = 0.8  # a new output name this like a gone one, with another expression: a typo


def render_sql(text: str) -> str:
    """Jinja-SQL as parseable SQL (see the module docstring)."""
    text = _REF.sub(lambda m: m["name"], text)
    text = _SOURCE.sub(lambda m: f"{m['src']}.{m['table']}", text)

    def one(match: re.Match[str]) -> str:
        head = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        tail_end = text.find("\n", match.end())
        tail = text[match.end() : tail_end if tail_end >= 0 else len(text)]
        if match.group(0).startswith("{{") and (head.strip() or tail.strip()):
            return _placeholder(match.group(0))
        return " "

    return _JINJA.sub(one, text)


def _placeholder(block: str) -> str:
    return f"__jinja_{hashlib.sha1(' '.join(block.split()).encode()).hexdigest()[:8]}__"


def shown_name(name: str, *texts: str) -> str:
    """A name as its author wrote it: each placeholder `render_sql` put in it (a name glued
    to Jinja, `{{ method }}_amount`) back as the Jinja block of `texts` it stands for."""
    if "__jinja_" not in name:
        return name
    blocks = {_placeholder(m.group(0)): m.group(0) for t in texts for m in _JINJA.finditer(t)}
    return re.sub(r"__jinja_[0-9a-f]{8}__", lambda m: blocks.get(m.group(0), m.group(0)), name)


@dataclass
class Scope:
    """One select: outputs (lower-cased name -> expression SQL), joined relations (alias ->
    relation), and the SQL of its filters."""

    outputs: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # lower -> as written
    casts: dict[str, str] = field(default_factory=dict)  # output -> the type it is cast to
    joins: dict[str, str] = field(default_factory=dict)
    filters: dict[str, str] = field(default_factory=dict)  # where/having -> SQL
    body: str = ""


def _scope(select: exp.Expr) -> Scope:
    out = Scope(body=select.sql(dialect="duckdb").lower())
    while isinstance(select, exp.SetOperation):
        select = select.left
    if not isinstance(select, exp.Select):
        return out
    for projection in select.selects:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Star) or (
            isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)
        ):
            continue
        name = projection.alias_or_name
        if not name:
            continue
        out.outputs.setdefault(name.lower(), inner.sql(dialect="duckdb").lower())
        out.names.setdefault(name.lower(), name)
        if isinstance(inner, exp.Cast) and inner.args.get("to") is not None:
            out.casts.setdefault(name.lower(), inner.args["to"].sql(dialect="duckdb").lower())
    for join in select.args.get("joins") or []:
        table = join.this
        alias = (table.alias_or_name or "").lower()
        if alias:
            out.joins[alias] = table.sql(dialect="duckdb").lower()
    for key in ("where", "having"):
        if (part := select.args.get(key)) is not None:
            out.filters[key] = part.sql(dialect="duckdb").lower()
    return out


def read_scopes(text: str) -> dict[str, Scope] | None:
    """scope name ("" for the outermost select, else the CTE's name) -> Scope; None when the
    file does not parse once rendered."""
    tree = parse(render_sql(text))
    if tree is None:
        return None
    scopes: dict[str, Scope] = {}
    try:  # a tree sqlglot parsed may still be too deep for its generator (1,000 `?` in a row)
        for cte in tree.find_all(exp.CTE):
            if isinstance(cte.this, exp.Query):
                scopes.setdefault(cte.alias_or_name.lower(), _scope(cte.this))
        outer = tree.copy()
        if isinstance(outer, exp.Query):
            outer.set("with_", None)
            outer.set("with", None)
        scopes[""] = _scope(outer)
    except RecursionError:
        return None
    return scopes


_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b")


def literals(sql: str) -> list[str]:
    return _LITERAL.findall(sql)


def _shape(sql: str) -> str:
    return _LITERAL.sub("?", sql)


@dataclass(frozen=True)
class SqlIntent:
    """An intent found in one SQL file, before the description is written."""

    kind: str
    old: str = ""
    new: str = ""
    scope: str = ""
    place: str = ""  # for a literal: the output column, or where/having
    was: str = ""  # for a literal: the place's SQL before the change


def sql_intents(before: str, after: str) -> list[SqlIntent]:
    """The intents of one SQL file's change; [] when either side does not parse."""
    was, now = read_scopes(before), read_scopes(after)
    if was is None or now is None:
        return []
    found: list[SqlIntent] = []
    renamed_ctes = _cte_renames(was, now)
    for old, new in renamed_ctes.items():
        found.append(SqlIntent("cte_renamed", old, new))
    matched = {**renamed_ctes}
    for name in now:
        if name and name not in was and name not in renamed_ctes.values():
            found.append(SqlIntent("cte_added", new=name))
    for name, scope in now.items():
        old_name = next((o for o, n in matched.items() if n == name), name)
        if old_name in was:
            found += _scope_intents(was[old_name], scope, name)
    return found


def _cte_renames(was: dict[str, Scope], now: dict[str, Scope]) -> dict[str, str]:
    gone = [n for n in was if n and n not in now]
    new = [n for n in now if n and n not in was]
    found = {}
    for old in gone:
        same = [n for n in new if now[n].body == was[old].body]
        if len(same) == 1:
            found[old] = same[0]
    return found


def _scope_intents(was: Scope, now: Scope, scope: str) -> list[SqlIntent]:
    found: list[SqlIntent] = []
    gone = [n for n in was.outputs if n not in now.outputs]
    new = [n for n in now.outputs if n not in was.outputs]
    for old in list(gone):
        same = [n for n in new if now.outputs[n] == was.outputs[old]]
        if len(same) == 1:
            found.append(SqlIntent("column_renamed", was.names[old], now.names[same[0]], scope))
            gone.remove(old)
            new.remove(same[0])
    for old in list(gone):  # a near spelling with another expression: a typo, not an intent
        typo = [n for n in new if difflib.SequenceMatcher(None, old, n).ratio() >= TYPO_RATIO]
        if len(typo) == 1:
            gone.remove(old)
            new.remove(typo[0])
    found += [SqlIntent("column_removed", old=was.names[n], scope=scope) for n in gone]
    found += [SqlIntent("column_added", new=now.names[n], scope=scope) for n in new]
    for name in was.outputs.keys() & now.outputs.keys():
        before, after = was.outputs[name], now.outputs[name]
        if before == after:
            continue
        old_type, new_type = was.casts.get(name, ""), now.casts.get(name, "")
        if old_type != new_type:  # a cast retyped, added or taken off
            found.append(SqlIntent("type_changed", old_type, new_type, scope, now.names[name]))
        elif _shape(before) == _shape(after):
            found.append(_literal(before, after, scope, now.names[name]))
    for key in was.filters.keys() & now.filters.keys():
        before, after = was.filters[key], now.filters[key]
        if before != after and _shape(before) == _shape(after):
            found.append(_literal(before, after, scope, key))
    for alias in now.joins.keys() - was.joins.keys():
        found.append(SqlIntent("join_added", new=alias, scope=scope, place=now.joins[alias]))
    return found


def _literal(before: str, after: str, scope: str, place: str) -> SqlIntent:
    pairs = [(a, b) for a, b in zip(literals(before), literals(after), strict=False) if a != b]
    old, new = pairs[0] if pairs else ("", "")
    return SqlIntent("literal_changed", old, new, scope, place, was=before)


def sql_holds(intent: SqlIntent, text: str) -> bool:
    """Whether `text` (the file once a candidate is applied) still has the change's intent;
    True when it does not parse (nothing can be said)."""
    scopes = read_scopes(text)
    if scopes is None:
        return True
    if intent.kind == "cte_added":
        return intent.new in scopes
    if intent.kind == "cte_renamed":
        return intent.new in scopes and intent.old not in scopes
    scope = scopes.get(intent.scope) or scopes[""]
    outputs = scope.outputs
    if intent.kind == "column_renamed":
        return intent.new.lower() in outputs and intent.old.lower() not in outputs
    if intent.kind == "column_added":
        return intent.new.lower() in outputs
    if intent.kind == "column_removed":
        return intent.old.lower() not in outputs
    if intent.kind == "join_added":
        return intent.new in scope.joins
    if intent.kind == "type_changed":
        return scope.casts.get(intent.place.lower(), "") != intent.old
    if intent.kind == "literal_changed":
        place = intent.place.lower()
        current = scope.filters.get(place) if place in ("where", "having") else outputs.get(place)
        return current != intent.was
    return True

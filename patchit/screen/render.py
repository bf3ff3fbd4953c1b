"""A light render of a dbt model's Jinja: `ref()` and `source()` to relation names, and
`config()` to nothing, and nothing else.

dbt itself is not run for a screen (a warm invocation costs about a second). Instead the
template is parsed with Jinja's own parser and walked: plain text, and calls of `ref`,
`source` and `config` with literal arguments, are all it accepts. Anything else (a macro, an
`{% if %}`, `is_incremental()`, `var()`, `this`, a filter) makes it `Unsure`: the screen
cannot build the SQL with certainty, so the candidate goes on to the harness unscreened. The
template is never executed, so a candidate's Jinja cannot run code in patchit's process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2 import nodes

# Relation names a config() can change, or a config that takes the node out of the run: a
# model whose own relation moves (or that is not built) cannot stand in for its dependents.
RELATION_CONFIGS = frozenset({"alias", "schema", "database", "enabled"})

_ENV = jinja2.Environment()


class Unsure(Exception):
    """The screen cannot judge this (internal: turned into a `skipped` line, never raised
    out of `patchit.screen`)."""


@dataclass(frozen=True)
class Resolved:
    """What a ref() or source() names: its node id and the relation text dbt renders."""

    unique_id: str
    relation: str


@dataclass
class Rendered:
    """A model's SQL with refs and sources replaced, and the nodes they name."""

    sql: str
    parents: list[str] = field(default_factory=list)
    moves_relation: bool = False  # config() sets alias/schema/database/enabled or ephemeral


Resolver = Callable[[str, tuple[str, ...]], Resolved]


def render_model(text: str, resolve: Resolver) -> Rendered:
    """Render `text`; `resolve("ref" | "source", args)` names a relation or raises Unsure."""
    try:
        tree = _ENV.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise Unsure(f"Jinja the screen cannot parse ({exc.message})") from exc
    rendered = Rendered(sql="")
    parts: list[str] = []
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise Unsure(f"uses a Jinja {type(node).__name__.lower()} block")
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                parts.append(child.data)
            else:
                parts.append(_call(child, resolve, rendered))
    rendered.sql = "".join(parts)
    return rendered


def _call(node: nodes.Node, resolve: Resolver, rendered: Rendered) -> str:
    if not (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Name)
        and node.dyn_args is None
        and node.dyn_kwargs is None
    ):
        raise Unsure(f"uses Jinja beyond ref/source/config ({_describe(node)})")
    name = node.node.name
    if name == "config":
        kwargs = {k.key: _literal(k.value) for k in node.kwargs}
        if node.args:
            raise Unsure("calls config() with positional arguments")
        if RELATION_CONFIGS & kwargs.keys() or kwargs.get("materialized") == "ephemeral":
            rendered.moves_relation = True
        return ""
    if name not in ("ref", "source"):
        raise Unsure(f"calls {name}(), which the screen does not render")
    if node.kwargs:
        raise Unsure(f"calls {name}() with keyword arguments")
    args = tuple(_literal(a) for a in node.args)
    if not all(isinstance(a, str) for a in args):
        raise Unsure(f"calls {name}() with arguments that are not strings")
    found = resolve(name, args)
    rendered.parents.append(found.unique_id)
    return found.relation


def _literal(node: nodes.Node) -> Any:
    """A constant (or a list, tuple or dict of them); Unsure for any expression."""
    if isinstance(node, nodes.Const):
        return node.value
    if isinstance(node, nodes.List | nodes.Tuple):
        return [_literal(item) for item in node.items]
    if isinstance(node, nodes.Dict):
        return {_literal(pair.key): _literal(pair.value) for pair in node.items}
    raise Unsure(f"passes an expression ({_describe(node)}) where the screen needs a literal")


def _describe(node: nodes.Node) -> str:
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name):
        return f"{node.node.name}()"
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
        return f"{_describe(node.node)}()"
    if isinstance(node, nodes.Getattr):
        return f"{_describe(node.node)}.{node.attr}"
    if isinstance(node, nodes.Name):
        return node.name
    return type(node).__name__.lower()

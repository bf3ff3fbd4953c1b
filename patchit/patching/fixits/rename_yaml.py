"""A renamed column followed into dbt's YAML properties: the model's `columns:` entry (its tests
and description move with it) and every `relationships` test that points at the column
(`to: ref('model')`, `field: old`), and the SQL arguments of the model's tests
(`expression: "order_total - tax_paid = subtotal"`), the old name renamed as a whole name.

The file is read with ruamel (round trip, for the line and column of each scalar) and edited
as text at those spots, so comments, order and quoting stay as the author wrote them. It
refuses when the model's properties name the old column anywhere else (a model-level test's
column list, a `columns:` entry named twice): a half-followed rename is a wrong fix.

Semantic models built on the model (`semantic_models:` with `model: ref('<model>')`) follow
too: an `expr` naming the old column is rewritten, and an entity, dimension or measure that
MetricFlow reads by its own name gets `expr: <new>` (its name, the metrics' interface, stays).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from patchit.patching.fixits.rename_sites import Refusal

_REFS = ("ref('{m}')", 'ref("{m}")')
# generic tests' arguments that are SQL over the model (dbt_utils.expression_is_true's
# `expression`, a `where` config, ...): a renamed column in them is renamed as a whole name
_SQL_ARGS = frozenset({"expression", "condition", "where", "row_condition"})


def _load(text: str) -> object:
    try:
        return YAML(typ="rt").load(text)
    except (YAMLError, ValueError):
        return None


def _walk(node: object, key: str = "") -> Iterator[tuple[CommentedMap, str, object]]:
    """(mapping, key, value) of every mapping entry under `node`, depth first."""
    if isinstance(node, CommentedMap):
        for k, value in node.items():
            yield node, str(k), value
            yield from _walk(value, str(k))
    elif isinstance(node, CommentedSeq):
        for item in node:
            yield from _walk(item, key)


def _scalars(
    node: object, key: str = "", refs: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str]]:
    """(key, string) of every string scalar under `node` (a list's items under its key); with
    `refs`, a relationships test's `field` that names another model's column (`to:` is not
    one of `refs`) is left out: jaffle-shop's `orders.customer_id` tested against
    `stg_customers.customer_id` does not name the renamed column of `orders`."""
    if isinstance(node, CommentedMap):
        target = node.get("to")
        elsewhere = bool(refs) and isinstance(target, str) and target.replace(" ", "") not in refs
        for k, value in node.items():
            if not (elsewhere and str(k) == "field"):
                yield from _scalars(value, str(k), refs)
    elif isinstance(node, CommentedSeq):
        for item in node:
            yield from _scalars(item, key, refs)
    elif isinstance(node, str):
        yield key, node


def follow_in_yaml(text: str, model: str, renames: dict[str, str]) -> str | Refusal:
    """`text` with the renamed columns of `model` followed (unchanged when it names none)."""
    lowered = {old.lower(): new for old, new in renames.items()}
    if not any(old in text.lower() for old in lowered):
        return text
    doc = _load(text)
    if doc is None:
        return Refusal("the YAML does not parse")
    spots: list[tuple[int, int, str, str]] = []  # line, column, old as written, new
    models = doc.get("models") if isinstance(doc, CommentedMap) else None
    for entry in models if isinstance(models, CommentedSeq) else []:
        if not isinstance(entry, CommentedMap) or str(entry.get("name", "")).lower() != model:
            continue
        seen: set[str] = set()
        for column in entry.get("columns") or []:
            name = column.get("name") if isinstance(column, CommentedMap) else None
            if isinstance(name, str) and name.lower() in lowered:
                if name.lower() in seen:
                    return Refusal(f"{model}'s properties list column {name} twice")
                seen.add(name.lower())
                line, col = column.lc.value("name")
                spots.append((line, col, name, lowered[name.lower()]))
        for mapping, key, value in _walk(entry):  # a test's SQL arguments read it too
            if key in _SQL_ARGS and isinstance(value, str):
                renamed = _renamed_expr(value, lowered)
                if renamed != value:
                    line, col = mapping.lc.value(key)
                    spots.append((line, col, value, renamed))
        own = frozenset(r.format(m=model) for r in _REFS)
        named = [(k, s) for k, s in _scalars(entry, refs=own)
                 if s.lower() in lowered and k not in _SQL_ARGS]  # fmt: skip
        if len(named) > len(seen) or any(k != "name" for k, _ in named):
            return Refusal(f"{model}'s properties name a renamed column outside `columns:`")
    refs = {r.format(m=model) for r in _REFS}
    for mapping, key, value in _walk(doc):
        if key != "field" or not isinstance(value, str) or value.lower() not in lowered:
            continue
        target = mapping.get("to")
        if isinstance(target, str) and target.replace(" ", "") in refs:
            line, col = mapping.lc.value("field")
            spots.append((line, col, value, lowered[value.lower()]))
    lines = text.splitlines(keepends=True)
    inserts: list[tuple[int, str]] = []  # after line, the line to insert
    for semantic in _semantic_models(doc, refs):
        for spot in _semantic_spots(semantic, lowered, lines):
            if isinstance(spot, Refusal):
                return spot
            if len(spot) == 2:
                inserts.append(spot)
            else:
                spots.append(spot)
    for line, col, old, new in sorted(spots, reverse=True):
        current = lines[line]
        quote = current[col] if current[col : col + 1] in ("'", '"') else ""
        start = col + len(quote)
        if current[start : start + len(old)] != old:
            return Refusal(f"cannot find {old} where the YAML parser puts it (line {line + 1})")
        lines[line] = current[:start] + new + current[start + len(old) :]
    for after, added in sorted(inserts, reverse=True):
        lines.insert(after + 1, added)
    return "".join(lines)


def _semantic_models(doc: object, refs: set[str]) -> Iterator[CommentedMap]:
    """The `semantic_models:` entries built on the model (`model: ref('<model>')`)."""
    entries = doc.get("semantic_models") if isinstance(doc, CommentedMap) else None
    for entry in entries if isinstance(entries, CommentedSeq) else []:
        target = entry.get("model") if isinstance(entry, CommentedMap) else None
        if isinstance(target, str) and target.replace(" ", "") in refs:
            yield entry


Spot = tuple[int, int, str, str] | tuple[int, str]


def _semantic_spots(
    semantic: CommentedMap, lowered: dict[str, str], lines: list[str]
) -> Iterator[Spot | Refusal]:
    """Where a semantic model reads a renamed column: an `expr` naming it is rewritten; an
    entity, dimension or measure named after it with no `expr` (MetricFlow reads the column
    of its name) gets `expr: <new>`, so its own name, which metrics and saved queries use,
    stays."""
    for kind in ("entities", "dimensions", "measures"):
        for item in semantic.get(kind) or []:
            if not isinstance(item, CommentedMap):
                continue
            expr, name = item.get("expr"), item.get("name")
            if isinstance(expr, str):
                new_expr = _renamed_expr(expr, lowered)
                if new_expr != expr:
                    line, col = item.lc.value("expr")
                    yield (line, col, expr, new_expr)
            elif expr is None and isinstance(name, str) and name.lower() in lowered:
                line, _col = item.lc.value("name")
                key_line, key_col = item.lc.key("name")
                if key_line != line:
                    yield Refusal(f"cannot place an expr for {name} (line {line + 1})")
                    continue
                end = "\r\n" if lines[line].endswith("\r\n") else "\n"
                yield (line, f"{' ' * key_col}expr: {lowered[name.lower()]}{end}")


def _renamed_expr(expr: str, lowered: dict[str, str]) -> str:
    """A SQL expression with each renamed column, as a whole name, renamed."""
    return re.sub(r"(?<![\w.'\"])[A-Za-z_]\w*(?![\w'\"])",
                  lambda m: lowered.get(m.group(0).lower(), m.group(0)), expr)  # fmt: skip

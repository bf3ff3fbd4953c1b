"""TypeError between a naive and an aware datetime -> compare them in UTC.

    TypeError: can't compare offset-naive and offset-aware datetimes
    TypeError: can't subtract offset-naive and offset-aware datetimes

Only where the failing line orders (`<`, `<=`, `>`, `>=`) or subtracts two operands of which
exactly one is naive by construction: `datetime.now()`, `datetime.utcnow()`,
`datetime.fromtimestamp(t)`, `datetime(y, m, d, ...)` without a time zone, `strptime` with a
literal format without `%z`. The error says one side is aware, so the other one is. That side
is made aware as UTC, the convention of Airflow (whose dates are aware, in UTC) and of most
pipelines: a clock or a timestamp as the same instant (`datetime.now(timezone.utc)` in place
of `now()`/`utcnow()`, `fromtimestamp(t, timezone.utc)`), never the local time read as UTC; a
built or parsed value with `.replace(tzinfo=timezone.utc)`.

A parsed text (`fromisoformat`, `strptime` of another format) may carry an offset in some rows
and not in others: making it aware would shift the rows that have one. Against `now(<UTC>)`,
the aware side is made naive instead (`.replace(tzinfo=None)`): the comparison happens in UTC,
and a row with an offset still fails loudly. Anything else is left alone, as is a file where
`datetime` or `timezone` names something else than the standard library's.
"""

from __future__ import annotations

import ast
import re
from typing import ClassVar, Literal

from patchit.evidence.model import Evidence
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits.python_common import (
    failing_frame,
    make_candidate,
    nodes_on_line,
    read_source,
    replace_spans,
    span_of,
)

_MIXED = re.compile(r"can't (compare|subtract) offset-naive and offset-aware datetimes")
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# line breaks str.splitlines() sees and Python's tokenizer does not: line numbers would differ
_ODD_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_UTC_NAMES = re.compile(r"^(?:(?:datetime\.)?timezone\.utc|(?:datetime\.)?UTC)$")
Form = Literal["class", "module"]


def _bindings(tree: ast.Module, name: str) -> list[ast.AST]:
    """Every node of the file that binds `name`: imports, assignments, parameters, defs."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found += [node for a in node.names if (a.asname or a.name.split(".")[0]) == name]
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            found += [node] if node.id == name else []
        elif isinstance(node, ast.arg) and node.arg == name:
            found.append(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found += [node] if node.name == name else []
        elif isinstance(node, ast.Global | ast.Nonlocal) and name in node.names:
            found.append(node)
    return found


def _from_datetime(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.ImportFrom) and node.module == "datetime" and node.level == 0
            and any(a.name == name and a.asname is None for a in node.names))  # fmt: skip


def _form(tree: ast.Module) -> Form | None:
    """How the file names the standard `datetime` class: `datetime` (from datetime import
    datetime) or `datetime.datetime` (import datetime); None when the name is bound any
    other way, or both ways."""
    bound = _bindings(tree, "datetime")
    if bound and all(_from_datetime(n, "datetime") for n in bound):
        return "class"
    plain = [isinstance(n, ast.Import) and any(a.name == "datetime" and a.asname is None
                                               for a in n.names) for n in bound]  # fmt: skip
    if bound and all(plain):
        return "module"
    return None


class _Reader:
    """Reads operands as naive or aware by construction, in a file of a given form."""

    def __init__(self, form: Form) -> None:
        self.form = form

    def is_class(self, node: ast.expr) -> bool:
        if self.form == "class":
            return isinstance(node, ast.Name) and node.id == "datetime"
        return (isinstance(node, ast.Attribute) and node.attr == "datetime"
                and isinstance(node.value, ast.Name) and node.value.id == "datetime")  # fmt: skip

    def _call(self, node: ast.expr) -> ast.Call | None:
        """A call with plain arguments (no `*args`, no `**kwargs`)."""
        if not isinstance(node, ast.Call):
            return None
        if any(isinstance(a, ast.Starred) for a in node.args):
            return None
        return None if any(k.arg is None for k in node.keywords) else node

    def naive(self, node: ast.expr) -> str | None:
        """ "clock" (`now()`, `utcnow()`), "stamp" (`fromtimestamp(t)`), "value"
        (`datetime(...)` without tzinfo, `strptime` with a literal format without `%z`),
        "parsed" (`fromisoformat`, another `strptime`), or None when it may be aware."""
        call = self._call(node)
        if call is None or any(k.arg in ("tz", "tzinfo") for k in call.keywords):
            return None
        func = call.func
        if self.is_class(func):  # datetime(2024, 1, 1[, h, m, s, us, tzinfo])
            return "value" if len(call.args) < 8 else None
        if not isinstance(func, ast.Attribute) or not self.is_class(func.value):
            return None
        if func.attr in ("now", "utcnow") and not call.args and not call.keywords:
            return "clock"
        if func.attr == "fromtimestamp" and len(call.args) == 1 and not call.keywords:
            return "stamp"
        if func.attr == "strptime" and len(call.args) == 2:
            form = call.args[1]
            if isinstance(form, ast.Constant) and isinstance(form.value, str):
                return None if "%z" in form.value or "%Z" in form.value else "value"
            return "parsed"
        return "parsed" if func.attr == "fromisoformat" else None

    def utc_now(self, node: ast.expr, text: str) -> bool:
        """`datetime.now(<UTC>)`: aware by construction, in UTC."""
        call = self._call(node)
        if call is None or not isinstance(call.func, ast.Attribute):
            return False
        if call.func.attr != "now" or not self.is_class(call.func.value):
            return False
        given = [*call.args, *(k.value for k in call.keywords if k.arg == "tz")]
        if len(given) != 1 or len(call.args) + len(call.keywords) != 1:
            return False
        return bool(_UTC_NAMES.match(ast.get_source_segment(text, given[0]) or ""))


def _operands(node: ast.AST, subtract: bool) -> tuple[ast.expr, ast.expr] | None:
    if subtract:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            return node.left, node.right
        return None
    if (isinstance(node, ast.Compare) and len(node.comparators) == 1
            and isinstance(node.ops[0], _ORDER)):  # fmt: skip
        return node.left, node.comparators[0]
    return None


def _utc(tree: ast.Module, text: str, form: Form) -> tuple[str, str] | None:
    """(how to name UTC, the text with the import it needs), or None when `timezone` names
    something else in the file, or the import cannot be added on one plain line."""
    if form == "module":
        return "datetime.timezone.utc", text
    bound = _bindings(tree, "timezone")
    if bound:
        ok = all(_from_datetime(n, "timezone") for n in bound)
        return ("timezone.utc", text) if ok else None
    for node in tree.body:
        if _from_datetime(node, "datetime") and node.lineno == node.end_lineno:
            lines = text.splitlines(keepends=True)
            line = lines[node.lineno - 1]
            body = line.rstrip("\r\n")
            if "#" in body or "(" in body or ";" in body or "\\" in body:
                return None
            lines[node.lineno - 1] = f"{body}, timezone{line[len(body) :]}"
            return "timezone.utc", "".join(lines)
    return None


class NaiveAwareStrategy(FixIt):
    """Compare or subtract a naive and an aware datetime in UTC."""

    name: ClassVar[str] = "python_naive_aware"
    tag: ClassVar[str] = "naive_aware"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        mixed = _MIXED.search(evidence.event.error_message)
        if evidence.event.error_type != "TypeError" or frame is None or mixed is None:
            return []
        source = read_source(evidence, frame.path)
        if source is None or any(c in source[0] for c in _ODD_BREAKS):
            return []
        text, tree = source
        form = _form(tree)
        if form is None:
            return []
        reader = _Reader(form)
        found: list[tuple[ast.expr, ast.expr, str]] = []  # (naive side, other side, kind)
        for node in nodes_on_line(tree, frame.line):
            pair = _operands(node, mixed.group(1) == "subtract")
            if pair is None:
                continue
            kinds = [reader.naive(side) for side in pair]
            if sum(k is not None for k in kinds) != 1:
                continue
            i = 0 if kinds[0] is not None else 1
            found.append((pair[i], pair[1 - i], str(kinds[i])))
        if len(found) != 1:
            return []  # none, or two on the line: which one failed is unclear
        side, other, kind = found[0]
        if kind == "parsed":
            return self._naive_utc(evidence, text, reader, side, other, mixed.group(1))
        utc = _utc(tree, text, form)
        expr = ast.get_source_segment(text, side)
        if utc is None or expr is None or side.lineno != side.end_lineno:
            return []
        name, imported = utc
        assert isinstance(side, ast.Call)
        if kind == "clock":  # the same instant, aware: not the local clock read as UTC
            assert isinstance(side.func, ast.Attribute)
            fixed = f"{ast.get_source_segment(text, side.func.value)}.now({name})"
        elif kind == "stamp":
            call, stamp = (ast.get_source_segment(text, n) for n in (side.func, side.args[0]))
            fixed = f"{call}({stamp}, {name})"
        else:
            fixed = f"{expr}.replace(tzinfo={name})"
        # an import line gained `, timezone` at most: line numbers hold
        after = replace_spans(imported, [(*span_of(side), fixed)])
        assert frame is not None
        rationale = (
            f"{frame.path}:{frame.line} {mixed.group(1)}s a naive datetime ({expr}) with an "
            "aware one; make it aware as UTC"
        )
        return make_candidate(self, frame.path, text, after, rationale, 0.7)

    def _naive_utc(
        self, evidence: Evidence, text: str, reader: _Reader, side: ast.expr, other: ast.expr,
        verb: str,
    ) -> list[PatchCandidate]:  # fmt: skip
        """A parsed text against `now(<UTC>)`: that side made naive, in UTC."""
        frame = failing_frame(evidence)
        aware = ast.get_source_segment(text, other)
        parsed = ast.get_source_segment(text, side)
        if frame is None or aware is None or parsed is None or other.lineno != other.end_lineno:
            return []
        if not reader.utc_now(other, text):
            return []  # the parsed text may carry an offset: then the other side is naive
        rationale = (
            f"{frame.path}:{frame.line} {verb}s a parsed datetime ({parsed}) with an aware "
            f"now ({aware}); compare in naive UTC, so that a text with an offset still fails "
            "rather than being shifted"
        )
        after = replace_spans(text, [(*span_of(other), f"{aware}.replace(tzinfo=None)")])
        return make_candidate(self, frame.path, text, after, rationale, 0.7)

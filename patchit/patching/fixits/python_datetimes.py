"""TypeError between a naive and an aware datetime -> make the naive side aware, as UTC.

    TypeError: can't compare offset-naive and offset-aware datetimes
    TypeError: can't subtract offset-naive and offset-aware datetimes

Only where the failing line compares (or subtracts) two operands of which exactly one is
naive by construction: `datetime.now()`, `datetime.utcnow()`, `datetime.fromtimestamp(t)`,
`datetime(y, m, d, ...)` without a time zone, `strptime` with a literal format without `%z`;
the error says one side is aware, so the other one is. A parsed text (`fromisoformat`, another
`strptime`) may carry an offset: it counts as the naive side only against a side aware by
construction (`datetime.now(timezone.utc)`, `.astimezone(...)`, a `tz=`/`tzinfo=`).
The naive side is made aware as UTC, the convention of Airflow (whose dates are aware, in
UTC) and of most pipelines: `.replace(tzinfo=timezone.utc)` on a parsed or built value; for
a clock or a timestamp, the same instant made aware (`datetime.now(timezone.utc)` in place of
`now()`/`utcnow()`, `fromtimestamp(t, timezone.utc)`), never the local time read as UTC.
`timezone` is imported from `datetime` where the file imports from it and lacks it. A line
with two such comparisons, or none, is left alone.
"""

from __future__ import annotations

import ast
import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits.python_common import (
    failing_frame,
    make_candidate,
    nodes_on_line,
    read_source,
)

_MIXED = re.compile(r"can't (compare|subtract) offset-naive and offset-aware datetimes")
_PARSERS = {"fromisoformat", "strptime"}
_CLOCKS = {"now", "utcnow"}


def _datetime_class(node: ast.expr) -> str | None:
    """How the code names the `datetime` class: "datetime" or "datetime.datetime"."""
    if isinstance(node, ast.Name) and node.id == "datetime":
        return "datetime"
    if (isinstance(node, ast.Attribute) and node.attr == "datetime"
            and isinstance(node.value, ast.Name) and node.value.id == "datetime"):  # fmt: skip
        return "datetime.datetime"
    return None


def _aware(node: ast.expr) -> bool:
    """Aware by construction: a datetime call given a time zone (`now(tz)`, `tz=`,
    `tzinfo=`, `fromtimestamp(t, tz)`, `datetime(..., tzinfo)`), `.astimezone(...)`, or a
    `.replace(tzinfo=...)` with one."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if any(k.arg in ("tz", "tzinfo") and not _is_none(k.value) for k in node.keywords):
        return True
    if _datetime_class(func) is not None:
        return len(node.args) >= 8 and not _is_none(node.args[7])
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "astimezone":
        return True
    on_class = _datetime_class(func.value) is not None
    return on_class and (
        (func.attr == "now" and len(node.args) == 1 and not _is_none(node.args[0]))
        or (func.attr == "fromtimestamp" and len(node.args) == 2)
    )


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _naive(node: ast.expr) -> str | None:
    """ "clock" for `now()`/`utcnow()` without a tz, "stamp" for `fromtimestamp(t)`, "value"
    for another naive-by-construction datetime, None when the operand may be aware."""
    if not isinstance(node, ast.Call):
        return None
    if any(k.arg in ("tz", "tzinfo") for k in node.keywords):
        return None
    func = node.func
    if _datetime_class(func) is not None:  # datetime(2024, 1, 1[, ..., tzinfo])
        return "value" if len(node.args) < 8 else None
    if not isinstance(func, ast.Attribute) or _datetime_class(func.value) is None:
        return None
    if func.attr in _CLOCKS and not node.args:
        return "clock"
    if func.attr == "fromtimestamp" and len(node.args) == 1:
        return "stamp"
    if func.attr == "strptime" and len(node.args) == 2:
        form = node.args[1]
        if isinstance(form, ast.Constant) and isinstance(form.value, str):
            return None if "%z" in form.value or "%Z" in form.value else "value"
    return "parsed" if func.attr in _PARSERS else None


def _operands(node: ast.AST, subtract: bool) -> tuple[ast.expr, ast.expr] | None:
    if subtract:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            return node.left, node.right
        return None
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        return node.left, node.comparators[0]
    return None


def _utc(tree: ast.Module, text: str) -> tuple[str, str] | None:
    """(how to name UTC, the text with the import it needs), or None when the file imports
    nothing of `datetime` to build on."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "datetime" and node.level == 0:
            if any(a.name == "timezone" and a.asname is None for a in node.names):
                return "timezone.utc", text
            if node.lineno != node.end_lineno or any(a.name == "*" for a in node.names):
                continue
            lines = text.splitlines(keepends=True)
            line = lines[node.lineno - 1]
            body = line.rstrip("\r\n")
            if "#" in body or "(" in body or ";" in body:
                continue
            lines[node.lineno - 1] = f"{body}, timezone{line[len(body) :]}"
            return "timezone.utc", "".join(lines)
    for node in tree.body:
        if isinstance(node, ast.Import) and any(
            a.name == "datetime" and a.asname is None for a in node.names
        ):
            return "datetime.timezone.utc", text
    return None


class NaiveAwareStrategy(FixIt):
    """Make the naive side of a naive/aware datetime comparison aware, as UTC."""

    name: ClassVar[str] = "python_naive_aware"
    tag: ClassVar[str] = "naive_aware"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        mixed = _MIXED.search(evidence.event.error_message)
        if evidence.event.error_type != "TypeError" or frame is None or mixed is None:
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        subtract = mixed.group(1) == "subtract"
        found: list[tuple[ast.expr, str]] = []
        for node in nodes_on_line(tree, frame.line):
            pair = _operands(node, subtract)
            if pair is None:
                continue
            kinds = [(side, _naive(side)) for side in pair]
            naive = [(side, kind) for side, kind in kinds if kind is not None]
            if len(naive) != 1:
                continue
            side, kind = naive[0]
            other = pair[1] if side is pair[0] else pair[0]
            if kind == "parsed" and not _aware(other):
                continue  # the parsed text may carry an offset: then the other side is naive
            found.append((side, kind))
        if len(found) != 1:
            return []  # none, or two comparisons on the line: which one failed is unclear
        side, kind = found[0]
        utc = _utc(tree, text)
        expr = ast.get_source_segment(text, side)
        if utc is None or expr is None or side.lineno != side.end_lineno:
            return []
        name, imported = utc
        assert isinstance(side, ast.Call) and isinstance(side.func, ast.Attribute | ast.Name)
        if kind == "clock":  # the same instant, aware: not the local clock read as UTC
            assert isinstance(side.func, ast.Attribute)
            fixed = f"{ast.get_source_segment(text, side.func.value)}.now({name})"
        elif kind == "stamp":
            call, stamp = (ast.get_source_segment(text, n) for n in (side.func, side.args[0]))
            fixed = f"{call}({stamp}, {name})"
        else:
            fixed = f"{expr}.replace(tzinfo={name})"
        # the import line (if `timezone` was added to it) sits above: line numbers hold
        lines = imported.splitlines(keepends=True)
        row = lines[side.lineno - 1]
        start = len(row.encode()[: side.col_offset].decode())
        end = len(row.encode()[: side.end_col_offset].decode())
        lines[side.lineno - 1] = row[:start] + fixed + row[end:]
        rationale = (
            f"{frame.path}:{frame.line} {mixed.group(1)}s a naive datetime ({expr}) with an "
            f"aware one; make it aware as UTC"
        )
        return make_candidate(self, frame.path, text, "".join(lines), rationale, 0.7)

"""Airflow 2 habits on Airflow 3 -> the Airflow 3 way, for broken DAG files and failed tasks.

Two sources of moves, each taken only when the error names it and the code shows it:

- ruff's `AIR3` rules, run on a copy of the failing file. Only the fixes of diagnostics that
  name what the error names are kept (the removed keyword, the module that no longer exists),
  so no unrelated lint fix rides along:

      TypeError: DAG.__init__() got an unexpected keyword argument 'schedule_interval'
      ModuleNotFoundError: No module named 'airflow.operators.dummy'

- a table, from Airflow's upgrade notes, of what ruff does not rewrite:

      KeyError: 'execution_date'                  context["logical_date"]
      KeyError: 'yesterday_ds' (and _nodash,      derived from context["logical_date"]
                tomorrow_ds, tomorrow_ds_nodash)
      'RuntimeTaskInstance' object has no         ti.task.task_type (what Airflow 2 stored
        attribute 'operator'                      in ti.operator)
      cannot import name 'days_ago' from          pendulum.today("UTC").add(days=-N)
        'airflow.utils.dates'
      Invalid arguments were passed to X ...      the `provide_context=` keyword dropped
        'provide_context'

`prev_ds`, `next_ds`, `prev_execution_date` and `next_execution_date` have no table entry: in
Airflow 2 they depended on the schedule and on how the run was triggered, and Airflow 3 has no
value that equals them, so any rewrite would be a guess.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from patchit.events.model import FailureSource
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edits
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text
from patchit.patching.fixits.python_common import (
    enclosing_scope,
    failing_frame,
    nodes_on_line,
    parse_python,
    read_source,
    replace_spans,
    segment,
    span_of,
    top_level_names,
)

RUFF_TIMEOUT_S = 30.0

_UNEXPECTED_KWARG = re.compile(r"got an unexpected keyword argument '(?P<name>\w+)'")
_NO_MODULE = re.compile(r"No module named '(?P<module>airflow\.[\w.]+)'")
_IMPORT_NAME = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>airflow\.[\w.]+)'")
_KEY_ERROR = re.compile(r"^'(?P<key>\w+)'$")
_TI_OPERATOR = re.compile(r"'RuntimeTaskInstance' object has no attribute 'operator'")
_INVALID_ARGS = re.compile(r"Invalid arguments were passed to (?P<operator>\w+)")
_BACKTICKED = re.compile(r"`([\w.]+)`")

# Context keys Airflow 3 removed, as an expression of the context mapping `{c}` (its source
# text). Airflow 2 computed each from the logical date alone; in the task context of Airflow
# 3.3.2 `logical_date` is a pendulum DateTime, so `add`/`subtract` need no import.
# `{q}` is the quote the code used for the key: inside an f-string it cannot be the other one.
CONTEXT_KEYS: dict[str, str] = {
    "execution_date": "{c}[{q}logical_date{q}]",
    "yesterday_ds": "{c}[{q}logical_date{q}].subtract(days=1).strftime({q}%Y-%m-%d{q})",
    "yesterday_ds_nodash": "{c}[{q}logical_date{q}].subtract(days=1).strftime({q}%Y%m%d{q})",
    "tomorrow_ds": "{c}[{q}logical_date{q}].add(days=1).strftime({q}%Y-%m-%d{q})",
    "tomorrow_ds_nodash": "{c}[{q}logical_date{q}].add(days=1).strftime({q}%Y%m%d{q})",
}


@dataclass(frozen=True)
class _Failure:
    """What the fix-its read: the file to change, its text and tree, the error, the line."""

    evidence: Evidence
    path: str
    text: str
    tree: ast.Module
    message: str
    line: int | None


class Airflow3UpgradeStrategy(FixIt):
    """Rewrite an Airflow 2 habit that fails on Airflow 3, when the error names the habit."""

    name: ClassVar[str] = "airflow3_upgrade"
    tag: ClassVar[str] = "airflow3_upgrade"
    rank: ClassVar[int] = 1  # a general strategy: after the targeted fix-its (rank 0)

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        failure = _failure(evidence)
        if failure is None:
            return []
        moves: list[Callable[[_Failure], tuple[str, str] | None]] = [
            _context_key, _ti_operator, _days_ago, _provide_context, _ruff_move,
        ]  # fmt: skip
        for move in moves:
            if (found := move(failure)) is not None:
                after, rationale = found
                return self._candidate(failure, after, rationale)
        return []

    def _candidate(self, failure: _Failure, after: str, rationale: str) -> list[PatchCandidate]:
        if after == failure.text or parse_python(after) is None:
            return []  # an edit that does not parse is never proposed
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=derive_edits(failure.path, failure.text, after),
                rationale=rationale,
                confidence=0.9,
            )
        ]


def _failure(evidence: Evidence) -> _Failure | None:
    """The failing repository file (the innermost repo frame, else the DAG file)."""
    if evidence.event.source is not FailureSource.AIRFLOW:
        return None
    frame = failing_frame(evidence)
    path = frame.path if frame is not None else evidence.unit_path
    if not path or not path.endswith(".py"):
        return None
    source = read_source(evidence, path)
    if source is None:
        return None
    parts = [error_text(evidence), evidence.event.traceback or ""]
    message = "\n".join(p for p in parts if p)
    return _Failure(evidence, path, *source, message, frame.line if frame else None)


# -- the table ------------------------------------------------------------------------------


def _context_key(failure: _Failure) -> tuple[str, str] | None:
    """KeyError of a removed context key read as `context["key"]` on the failing line: every
    removed key read from that mapping in the function, rewritten from `logical_date`."""
    event = failure.evidence.event
    found = _KEY_ERROR.match(event.error_message.strip())
    if event.error_type != "KeyError" or found is None or failure.line is None:
        return None
    key = found["key"]
    if key not in CONTEXT_KEYS:
        return None
    failing = [n for n in nodes_on_line(failure.tree, failure.line)
               if _subscript_key(n) == key]  # fmt: skip
    receivers = {segment(failure.text, n.value) for n in failing if isinstance(n, ast.Subscript)}
    if len(receivers) != 1:
        return None
    (receiver,) = receivers
    if receiver is None:
        return None
    scope = enclosing_scope(failure.tree, failure.line)
    spans, keys = [], set()
    for node in ast.walk(scope):
        old = _subscript_key(node)
        if (
            isinstance(node, ast.Subscript)
            and old in CONTEXT_KEYS
            and isinstance(node.ctx, ast.Load)
            and segment(failure.text, node.value) == receiver
        ):
            quote = "'" if (segment(failure.text, node.slice) or "").startswith("'") else '"'
            spans.append((*span_of(node), CONTEXT_KEYS[old].format(c=receiver, q=quote)))
            keys.add(old)
    rationale = (
        f"KeyError: {key!r} at {failure.path}:{failure.line}: Airflow 3 removed the context "
        f'key(s) {", ".join(sorted(keys))}; read from {receiver}["logical_date"] instead'
    )
    return replace_spans(failure.text, spans), rationale


def _subscript_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        value = node.slice.value
        return value if isinstance(value, str) else None
    return None


def _ti_operator(failure: _Failure) -> tuple[str, str] | None:
    """`ti.operator` -> `ti.task.task_type`: Airflow 2 stored the task's type there."""
    if not _TI_OPERATOR.search(failure.message) or failure.line is None:
        return None
    failing = [n for n in nodes_on_line(failure.tree, failure.line)
               if isinstance(n, ast.Attribute) and n.attr == "operator"]  # fmt: skip
    receivers = {segment(failure.text, n.value) for n in failing}
    if len(receivers) != 1 or None in receivers:
        return None
    scope = enclosing_scope(failure.tree, failure.line)
    spans = [
        (*span_of(n), f"{segment(failure.text, n.value)}.task.task_type")
        for n in ast.walk(scope)
        if isinstance(n, ast.Attribute) and n.attr == "operator"
        and isinstance(n.ctx, ast.Load) and segment(failure.text, n.value) in receivers
    ]  # fmt: skip
    rationale = (
        f"AttributeError: Airflow 3's RuntimeTaskInstance has no 'operator' "
        f"({failure.path}:{failure.line}); Airflow 2 set it to the task's type, which is "
        "ti.task.task_type"
    )
    return replace_spans(failure.text, spans), rationale


def _days_ago(failure: _Failure) -> tuple[str, str] | None:
    """`days_ago(N)` (removed with `airflow.utils.dates.days_ago`) -> midnight UTC N days ago."""
    found = _IMPORT_NAME.search(failure.message)
    if found is None or (found["module"], found["name"]) != ("airflow.utils.dates", "days_ago"):
        return None
    imports = [
        n for n in failure.tree.body if isinstance(n, ast.ImportFrom)
        and n.module == "airflow.utils.dates" and any(a.name == "days_ago" for a in n.names)
    ]  # fmt: skip
    if len(imports) != 1:
        return None
    statement = imports[0]
    alias = next(a for a in statement.names if a.name == "days_ago")
    bound = alias.asname or alias.name
    calls = [n for n in ast.walk(failure.tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == bound]  # fmt: skip
    uses = [n for n in ast.walk(failure.tree) if isinstance(n, ast.Name) and n.id == bound]
    if not calls or len(uses) != len(calls) or any(len(c.args) != 1 or c.keywords for c in calls):
        return None  # passed around, or called with hour=/minute=: no guess
    # inside an f-string (Python < 3.12) the quotes must differ from the string's own
    quote = '"'
    doubles = [(*span_of(c), _today_minus(failure.text, c.args[0], quote)) for c in calls]
    if parse_python(replace_spans(failure.text, doubles)) is None:
        quote = "'"
    spans = [(*span_of(c), _today_minus(failure.text, c.args[0], quote)) for c in calls]
    others = [a for a in statement.names if a.name != "days_ago"]
    needs_import = "pendulum" not in top_level_names(failure.tree)
    new_import = "import pendulum" if needs_import else ""
    if others:
        kept = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in others)
        kept_statement = f"from airflow.utils.dates import {kept}"
        new_import = f"{new_import}\n{kept_statement}" if new_import else kept_statement
    start, col, end, end_col = span_of(statement)
    if new_import:
        spans.append((start, col, end, end_col, new_import))
    else:  # drop the statement's whole line(s)
        spans.append((start, 0, end + 1, 0, ""))
    rationale = (
        "ImportError: Airflow 3 removed airflow.utils.dates.days_ago; days_ago(N) was midnight "
        'UTC N days ago, which is pendulum.today("UTC").add(days=-N) '
        f"({len(calls)} call(s) in {failure.path})"
    )
    return replace_spans(failure.text, spans), rationale


def _today_minus(text: str, arg: ast.expr, quote: str) -> str:
    today = f"pendulum.today({quote}UTC{quote})"
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and arg.value >= 0:
        return today + (f".add(days=-{arg.value})" if arg.value else "")
    return f"{today}.add(days=-({segment(text, arg)}))"


def _provide_context(failure: _Failure) -> tuple[str, str] | None:
    """`provide_context=` (removed: the context is always passed) dropped from the calls of
    the operator the error names, in the DAG file."""
    found = _INVALID_ARGS.search(failure.message)
    if found is None or "'provide_context'" not in failure.message:
        return None
    operator = found["operator"]
    calls = [n for n in ast.walk(failure.tree) if isinstance(n, ast.Call)
             and _call_name(n) == operator
             and any(k.arg == "provide_context" for k in n.keywords)]  # fmt: skip
    if not calls:
        return None
    spans = [_keyword_removal(failure.text, c) for c in calls]
    rationale = (
        f"{operator} rejects provide_context on Airflow 3 (the context is always passed to "
        f"the callable): removed it from {len(calls)} call(s) in {failure.path}"
    )
    return replace_spans(failure.text, spans), rationale


def _call_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _keyword_removal(text: str, call: ast.Call) -> tuple[int, int, int, int, str]:
    """The span that removes `provide_context=...` from `call`, with its comma."""
    items: list[ast.AST] = sorted([*call.args, *call.keywords], key=lambda n: span_of(n)[:2])
    index = next(i for i, n in enumerate(items)
                 if isinstance(n, ast.keyword) and n.arg == "provide_context")  # fmt: skip
    start, col, end, end_col = span_of(items[index])
    lines = text.splitlines(keepends=True)
    before = lines[start - 1].encode()[:col].decode()
    after = lines[end - 1].encode()[end_col:].decode()
    if not before.strip() and re.fullmatch(r",?\s*(#.*)?\s*", after):
        return start, 0, end + 1, 0, ""  # on its own line(s): drop them
    if index > 0:
        _p, _c, prev_end, prev_end_col = span_of(items[index - 1])
        return prev_end, prev_end_col, end, end_col, ""
    if index + 1 < len(items):
        next_start, next_col, _e, _ec = span_of(items[index + 1])
        return start, col, next_start, next_col, ""
    return start, col, end, end_col, ""


# -- ruff's AIR3 rules ----------------------------------------------------------------------


def _ruff_move(failure: _Failure) -> tuple[str, str] | None:
    """The fixes of the AIR3 diagnostics that name what the error names, applied; an import
    of the module the error says is gone is removed once nothing uses its names."""
    related, gone = _relation(failure.message)
    if related is None:
        return None
    diagnostics = [d for d in run_ruff_air3(failure.text, Path(failure.path).name)
                   if d.get("fix") and any(related(t) for t in _tokens(d))]  # fmt: skip
    if not diagnostics:
        return None
    after = _apply_ruff_fixes(failure.text, diagnostics)
    if after is None:
        return None
    if gone is not None:
        after = _drop_gone_imports(after, *gone)
        if after is None:
            return None
    codes = sorted({f"{d.get('code')}: {d.get('message')}" for d in diagnostics})
    rationale = (
        f"Airflow 3 upgrade ({failure.message.splitlines()[0][:160]}): ruff's fix for "
        + "; ".join(codes)
    )
    return after, rationale


def _relation(message: str) -> tuple[Callable[[str], bool] | None, tuple[str, str | None] | None]:
    """(does a ruff diagnostic's name relate to the error?, (module, name) whose import fails)."""
    if found := _UNEXPECTED_KWARG.search(message):
        kwarg = found["name"]
        return (lambda token: token == kwarg), None
    if found := _IMPORT_NAME.search(message):
        qualified = f"{found['module']}.{found['name']}"
        return (lambda token: token == qualified), (found["module"], found["name"])
    if found := _NO_MODULE.search(message):
        module = found["module"]
        return (lambda token: token == module or token.startswith(module + ".")), (module, None)
    return None, None


def _tokens(diagnostic: dict[str, object]) -> list[str]:
    fix = diagnostic.get("fix")
    fix_message = fix.get("message") if isinstance(fix, dict) else None
    texts = [diagnostic.get("message"), fix_message]
    return [t for text in texts if isinstance(text, str) for t in _BACKTICKED.findall(text)]


def ruff_binary() -> str | None:
    """ruff beside this interpreter (the same environment), else on PATH."""
    local = Path(sys.executable).parent / "ruff"
    return str(local) if local.is_file() else shutil.which("ruff")


def run_ruff_air3(text: str, filename: str) -> list[dict[str, object]]:
    """ruff's AIR3 diagnostics (with their fixes, unsafe ones included) for `text`, checked as
    a copy in a temp dir: the user's repository is never touched, nor its ruff config read."""
    binary = ruff_binary()
    if binary is None:
        return []
    with tempfile.TemporaryDirectory(prefix="patchit-ruff-") as tmp:
        copy = Path(tmp) / filename
        copy.write_bytes(text.encode("utf-8"))
        cmd = [binary, "check", "--isolated", "--no-cache", "--preview", "--select", "AIR3",
               "--unsafe-fixes", "--exit-zero", "--output-format", "json", copy.name]  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, cwd=tmp, capture_output=True, text=True, timeout=RUFF_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
    try:
        found = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return []
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _apply_ruff_fixes(text: str, diagnostics: list[dict[str, object]]) -> str | None:
    """Apply the diagnostics' fix edits (ruff's rows and columns are 1-based characters)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(location: object) -> int:
        assert isinstance(location, dict)
        row, column = int(location["row"]), int(location["column"])
        return starts[min(row, len(starts)) - 1] + column - 1

    edits: list[tuple[int, int, str]] = []
    for diagnostic in diagnostics:
        fix = diagnostic["fix"]
        assert isinstance(fix, dict)
        for edit in fix.get("edits") or []:
            content = edit.get("content") or ""
            edits.append((offset(edit["location"]), offset(edit["end_location"]), content))
    edits = list(dict.fromkeys(edits))  # two diagnostics adding the same import add it once
    ordered = sorted(edits, key=lambda e: (e[0], e[1]))
    for (_s, end, _c), (start, _e, _n) in itertools.pairwise(ordered):
        if start < end:
            return None  # overlapping fixes: ruff would need two passes; no guess
    for start, end, content in reversed(ordered):
        text = text[:start] + content + text[end:]
    return text


def _drop_gone_imports(text: str, module: str, name: str | None) -> str | None:
    """Remove the imports from `module` (or of `name` from it) that nothing uses any more;
    None when one is still used (the file would still fail to import)."""
    tree = parse_python(text)
    if tree is None:
        return None
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    spans = []
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        if node.module != module and not node.module.startswith(module + "."):
            continue
        gone = [a for a in node.names if name is None or a.name == name]
        if not gone:
            continue
        if any((a.asname or a.name) in used for a in gone):
            return None
        kept = [a for a in node.names if a not in gone]
        start, col, end, end_col = span_of(node)
        if kept:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
            spans.append((start, col, end, end_col, f"from {node.module} import {names}"))
        else:
            spans.append((start, 0, end + 1, 0, ""))
    return replace_spans(text, spans)

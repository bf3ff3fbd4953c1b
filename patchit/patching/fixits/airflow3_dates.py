"""`execution_date` read off an Airflow 3 object that no longer has it -> the logical date.

    AttributeError: 'RuntimeTaskInstance' object has no attribute 'execution_date'
    AttributeError: 'DagRun' object has no attribute 'execution_date'

Airflow 3 renamed the run's date to `logical_date` (apache/airflow#43902). A DAG run has it
under the new name (`dag_run.logical_date`); a task instance has none, the date lives in the
task's context: the callable's `**kwargs` when it takes them untyped (or typed `Any`), else
`ti.get_template_context()["logical_date"]`, which works wherever `ti` does. Every
`<receiver>.execution_date` read in the failing function with the receiver of the failing
line moves; anything else the change wrote there (an XCom push, a new value) is kept.
`context["execution_date"]` (a KeyError) is `airflow3_upgrade`'s, templates are
`airflow3_template`'s.
"""

from __future__ import annotations

import ast
import re
from typing import ClassVar

from patchit.events.model import FailureSource
from patchit.evidence.model import Evidence
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text
from patchit.patching.fixits.python_common import (
    enclosing_scope,
    failing_frame,
    make_candidate,
    nodes_on_line,
    parse_python,
    read_source,
    replace_spans,
    segment,
    span_of,
)

_NO_ATTR = re.compile(r"'(?P<cls>\w+)' object has no attribute 'execution_date'")
_ANY = ("Any", "typing.Any", "t.Any")


class LogicalDateStrategy(FixIt):
    """Read the logical date where the code reads `execution_date` off a task instance or a
    DAG run that Airflow 3 no longer gives one."""

    name: ClassVar[str] = "airflow3_logical_date"
    tag: ClassVar[str] = "airflow3_upgrade"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        found = _NO_ATTR.search(error_text(evidence))
        if evidence.event.source is not FailureSource.AIRFLOW or frame is None or found is None:
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        failing = [n for n in nodes_on_line(tree, frame.line)
                   if isinstance(n, ast.Attribute) and n.attr == "execution_date"]  # fmt: skip
        receivers = {segment(text, n.value) for n in failing}
        if len(receivers) != 1 or None in receivers:
            return []
        (receiver,) = receivers
        assert receiver is not None
        scope = enclosing_scope(tree, frame.line)
        new = _logical_date(found["cls"], receiver, scope)
        if new is None:
            return []
        spans = [(*span_of(n), new) for n in ast.walk(scope)
                 if isinstance(n, ast.Attribute) and n.attr == "execution_date"
                 and isinstance(n.ctx, ast.Load)
                 and segment(text, n.value) == receiver]  # fmt: skip
        rationale = (
            f"AttributeError: Airflow 3's {found['cls']} has no 'execution_date' "
            f"({frame.path}:{frame.line}); the run's date is the logical date: "
            f"{receiver}.execution_date -> {new} ({len(spans)} read(s) in {frame.function})"
        )
        after = replace_spans(text, spans)
        if parse_python(after) is None:  # inside a "..." f-string (Python < 3.12)
            after = replace_spans(text, [(*s[:4], s[4].replace('"', "'")) for s in spans])
        return make_candidate(self, frame.path, text, after, rationale, 0.9)


def _logical_date(cls: str, receiver: str, scope: ast.AST) -> str | None:
    """The expression of the logical date for `receiver` (an object of class `cls`)."""
    if "DagRun" in cls:
        return f"{receiver}.logical_date"
    if "TaskInstance" not in cls:
        return None
    kwarg = scope.args.kwarg if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) else None
    if kwarg is not None and (kwarg.annotation is None or ast.unparse(kwarg.annotation) in _ANY):
        return f'{kwarg.arg}["logical_date"]'
    return f'{receiver}.get_template_context()["logical_date"]'

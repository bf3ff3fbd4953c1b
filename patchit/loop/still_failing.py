"""What a candidate left failing, said with the error the first unit fails with now: a fix that
made progress (the ref resolves; the model now stops on a column another commit removed)
reads as such in the attempt's line, the report and the next prompt, instead of as the same
failure again."""

from __future__ import annotations

import re

from patchit.evidence.intents import Intent
from patchit.harnesses.base import Verification

MAX_NAMED = 5
MAX_ERROR_CHARS = 160
# dbt's summary of a failed node: "Failure in model orders (models/orders.sql)", then
# "  Runtime Error in model orders (...)", then the error itself on the next line
_HEADER = re.compile(
    r"(?:Failure|Error) in (?:model|test|seed|snapshot|unit_test|source|analysis) "
    r"(?P<name>\S+) \("
)
_STAMP = re.compile(r"^(?:\x1b\[[0-9;]*m)*\d\d:\d\d:\d\d(?:\.\d+)?\s*")


def now_failing_with(output: str, unit_id: str) -> str | None:
    """The first line of the error `unit_id` fails with in a dbt run's `output`, or None when
    the output does not say (another runtime, or the summary was cut)."""
    parts = unit_id.split(".")
    name = parts[2] if len(parts) >= 3 else unit_id
    lines = output.splitlines()
    for number, line in enumerate(lines):
        found = _HEADER.search(line)
        if found is None or found.group("name") != name:
            continue
        for after in lines[number + 1 : number + 6]:
            text = _STAMP.sub("", after).strip()
            if text and not _HEADER.search(text):
                return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
        return None
    return None


def still_failing(result: Verification) -> str:
    """'still failing: <unit> (<its error now>), <unit>, ... and N more'."""
    first, *others = result.failures
    error = now_failing_with(result.output, first)
    named = [f"{first} ({error})" if error else first, *others[: MAX_NAMED - 1]]
    more = len(result.failures) - len(named)
    return "still failing: " + ", ".join(named) + (f" and {more} more" if more > 0 else "")


# intents whose old name, read by a unit that still fails, points at the change, not the fix
_GONE = ("column_removed", "column_renamed", "model_renamed", "macro_renamed", "cte_renamed")


def meant_by_the_change(result: Verification, intents: list[Intent]) -> str:
    """'; <name> is what the change meant: <intent>' when the error the first unit still
    fails with names what an intent of the change removed or renamed (the fix left it to
    another of the change's commits, or to a human), else ''."""
    intent = meant_intent(result, intents)
    return f"; {intent.old} is what the change meant: {intent.description}" if intent else ""


def meant_intent(result: Verification, intents: list[Intent]) -> Intent | None:
    """The intent of the change (a removal or a rename) whose old name the error the first
    still-failing unit fails with names, or None."""
    error = now_failing_with(result.output, result.failures[0]) if result.failures else None
    for intent in intents if error else ():
        if intent.kind in _GONE and intent.old and _names(error or "", intent.old):
            return intent
    return None


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None

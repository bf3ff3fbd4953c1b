"""Jinja in Airflow templated fields: the names a template reads, and the ones Airflow 3 took
out of the template context.

Airflow renders `bash_command`, `op_kwargs`, `templates_dict`, SQL files and TaskFlow arguments
with Jinja under `StrictUndefined`, so a variable the context lacks fails the task before any
repository code runs:

    jinja2.exceptions.UndefinedError: 'execution_date' is undefined

No traceback frame is the repository's, yet the bug is in the repository: the template names
something the runtime does not define. Airflow 3 removed `execution_date` and the variables
derived from it (upgrade notes, apache/airflow#43902); `REMOVED_TEMPLATE_VARS` holds the ones
with an exact Airflow 3 equivalent, written as a Jinja expression (parenthesised, so a filter
after it still applies to the whole): `logical_date` is the same instant, and the
yesterday/tomorrow strings are the logical date moved by a day. `prev_ds`, `next_ds`,
`prev_execution_date` and `next_execution_date` depended on the schedule and on how the run was
triggered; Airflow 3 has no value equal to them, so they have no entry.

Classification (`patchit.classify`) and the fix-it (`patching.fixits.airflow_templates`) share
this reading; neither renders anything.
"""

from __future__ import annotations

import re

REMOVED_TEMPLATE_VARS: dict[str, str] = {
    "execution_date": "logical_date",
    "yesterday_ds": "((logical_date - macros.timedelta(days=1)) | ds)",
    "yesterday_ds_nodash": "((logical_date - macros.timedelta(days=1)) | ds_nodash)",
    "tomorrow_ds": "((logical_date + macros.timedelta(days=1)) | ds)",
    "tomorrow_ds_nodash": "((logical_date + macros.timedelta(days=1)) | ds_nodash)",
}

# `execution_date` read off an object of the context: the DAG run has it as `logical_date`,
# a task instance no longer has it (the date is the context's `logical_date`)
REMOVED_TEMPLATE_ATTRS: dict[str, str] = {
    "dag_run.execution_date": "dag_run.logical_date",
    "ti.execution_date": "logical_date",
    "task_instance.execution_date": "logical_date",
}

# Airflow 3 also dropped these; no exact equivalent (see the module docstring)
REMOVED_WITHOUT_EQUIVALENT = frozenset(
    {"prev_ds", "next_ds", "prev_ds_nodash", "next_ds_nodash", "prev_execution_date",
     "next_execution_date", "prev_execution_date_success"}
)  # fmt: skip

_UNDEFINED = re.compile(r"UndefinedError: '(?P<name>\w+)' is undefined")
_UNDEFINED_MESSAGE = re.compile(r"^'(?P<name>\w+)' is undefined$")
_NO_ATTRIBUTE = re.compile(
    r"(?:^|UndefinedError: )'[\w.]+ object' has no attribute '(?P<name>\w+)'", re.M
)
# `{{ ... }}` and `{% ... %}`, never across a blank line (a stray brace in prose stays prose)
_REGION = re.compile(r"\{\{(?:(?!\n\s*\n).)*?\}\}|\{%(?:(?!\n\s*\n).)*?%\}", re.DOTALL)
# a bare variable: not an attribute (`.name`), not inside a word, not a keyword argument
# name (`f(name=...)`) and not a string's content (`'name'`)
_NAME = r"(?<![\w.'\"])%s(?![\w'\"])(?!\s*=[^=])"


def undefined_name(error_type: str, message: str) -> str | None:
    """The variable a Jinja `UndefinedError` names, from the packed error or the bare
    message (`'execution_date' is undefined`); None for another error."""
    if found := _UNDEFINED.search(message):
        return found["name"]
    if error_type.rsplit(".", 1)[-1] == "UndefinedError":
        found = _UNDEFINED_MESSAGE.match(message.strip())
        return found["name"] if found else None
    return None


def undefined_attribute(error_type: str, message: str) -> str | None:
    """The attribute a Jinja `UndefinedError` says an object of the context lacks
    (`'...DagRun object' has no attribute 'execution_date'`); None for another error."""
    if error_type.rsplit(".", 1)[-1] != "UndefinedError" and "UndefinedError" not in message:
        return None
    found = _NO_ATTRIBUTE.search(message)
    return found["name"] if found else None


def jinja_regions(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the Jinja expressions and statements in `text`."""
    return [m.span() for m in _REGION.finditer(text)]


def reads_variable(text: str, name: str) -> bool:
    """Whether a Jinja region of `text` reads the variable `name`."""
    pattern = re.compile(_NAME % re.escape(name))
    return any(pattern.search(text, start, end) for start, end in jinja_regions(text))


def replace_variables(text: str, table: dict[str, str]) -> tuple[str, set[str]]:
    """`text` with every variable of `table` read in a Jinja region replaced by its
    expression, and the names replaced. Text outside the regions is left as it is."""
    if not table:
        return text, set()
    names = "|".join(re.escape(n) for n in sorted(table, key=len, reverse=True))
    pattern = re.compile(_NAME % f"(?:{names})")
    done: set[str] = set()
    pieces: list[str] = []
    last = 0
    for start, end in jinja_regions(text):
        pieces.append(text[last:start])

        def one(match: re.Match[str]) -> str:
            done.add(match.group(0))
            return table[match.group(0)]

        pieces.append(pattern.sub(one, text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces), done

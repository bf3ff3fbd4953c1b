"""A template variable Airflow 3 removed -> its Airflow 3 equivalent, in every templated field.

    jinja2.exceptions.UndefinedError: 'execution_date' is undefined

Airflow renders templated fields (`bash_command`, `op_kwargs`, `templates_dict`, TaskFlow
arguments, a `.sql` or `.sh` file named by a field) before the task's code runs, so the
traceback holds no repository frame and the template may sit anywhere: a string passed to the
operator, a module constant several tasks share, a template file. The candidate rewrites the
removed variables (`patchit.evidence.templates.REMOVED_TEMPLATE_VARS`: `execution_date` ->
`logical_date`, `yesterday_ds` -> the logical date a day back, ...; and, when the error says
an object has no `execution_date`, `dag_run.execution_date` -> `dag_run.logical_date`) inside
the Jinja of:

- the failing task's DAG file (only its string literals: code and comments stay as they are);
- the files the breaking change touched, and the template files the DAG file names, that are
  Python modules (their string literals) or template files (their Jinja regions).

One candidate across the files, so every task of the incident that renders one of them is
fixed by the same edit; what the change meant (the new field, the shared constant) is kept,
only the variable's name moves forward. A variable with no exact equivalent
(`prev_ds`, `next_execution_date`) gets no candidate.
"""

from __future__ import annotations

import ast
from pathlib import PurePosixPath
from typing import ClassVar

from patchit.events.model import FailureSource
from patchit.evidence.model import Evidence
from patchit.evidence.templates import (
    REMOVED_TEMPLATE_ATTRS,
    REMOVED_TEMPLATE_VARS,
    reads_variable,
    replace_variables,
    undefined_attribute,
    undefined_name,
)
from patchit.patching.apply import derive_edit
from patchit.patching.base import Edit, FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, read_repo_file
from patchit.patching.fixits.python_common import parse_python, replace_spans, span_of

# what Airflow's operators render as a template file (their `template_ext`), plus Jinja's own
TEMPLATE_SUFFIXES = (".sql", ".hql", ".sh", ".bash", ".json", ".yaml", ".yml", ".j2",
                     ".jinja", ".jinja2", ".txt")  # fmt: skip
MAX_FILES = 20


class TemplateVariableStrategy(FixIt):
    """Rename a template variable Airflow 3 removed to its equivalent, where templates read it."""

    name: ClassVar[str] = "airflow3_template"
    tag: ClassVar[str] = "airflow3_upgrade"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        if evidence.event.source is not FailureSource.AIRFLOW:
            return []
        error_type, message = evidence.event.error_type, error_text(evidence)
        name = undefined_name(error_type, message)
        table = {**REMOVED_TEMPLATE_VARS, **REMOVED_TEMPLATE_ATTRS}
        if name is not None and name in REMOVED_TEMPLATE_VARS:
            named = {name}
            said = f"{name!r} is undefined"
        elif undefined_attribute(error_type, message) == "execution_date":
            named, said = set(REMOVED_TEMPLATE_ATTRS), "no attribute 'execution_date'"
        else:
            return []
        edits: list[Edit] = []
        replaced: set[str] = set()
        where: list[str] = []
        for path in template_paths(evidence):
            text = read_repo_file(evidence, path)
            if text is None:
                continue
            after, done = rewrite_file(path, text, table)
            if after != text:
                edits.append(derive_edit(path, text, after))
                replaced |= done
                where.append(path)
        if not replaced & named:
            return []  # what the error names is in no template we can read
        moves = ", ".join(f"{old} -> {table[old]}" for old in sorted(replaced))
        rationale = (
            f"UndefinedError: {said}: Airflow 3 removed it from the template "
            f"context; {moves} in the templates of {', '.join(where)}"
        )
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=edits,
                rationale=rationale,
                confidence=0.9,
            )
        ]


def template_paths(evidence: Evidence) -> list[str]:
    """The DAG file, then the changed files and the template files the DAG file names, that a
    template can live in (bounded)."""
    found: list[str] = []
    dag_file = evidence.unit_path
    if dag_file and dag_file.endswith(".py"):
        found.append(dag_file)
        found += _named_templates(evidence, dag_file)
    found += [p for p in evidence.changed_files if p.endswith((".py", *TEMPLATE_SUFFIXES))]
    return list(dict.fromkeys(found))[:MAX_FILES]


def _named_templates(evidence: Evidence, dag_file: str) -> list[str]:
    """Repo paths of the template files the DAG file's string literals name, looked up from
    the DAG file's folder (Airflow's default template search path), then the repo root."""
    text = read_repo_file(evidence, dag_file)
    tree = parse_python(text) if text is not None else None
    if tree is None:
        return []
    folder = PurePosixPath(dag_file).parent
    found = []
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, str) and value.endswith(TEMPLATE_SUFFIXES) and "\n" not in value:
            for base in (folder, PurePosixPath()):
                rel = (base / value.lstrip("/")).as_posix()
                if read_repo_file(evidence, rel) is not None:
                    found.append(rel)
                    break
    return found


def rewrite_file(path: str, text: str, table: dict[str, str]) -> tuple[str, set[str]]:
    """`text` with the removed variables of `table` moved forward: in a Python file only
    inside its string literals (not f-strings, whose `{{` is an escaped brace), elsewhere in
    every Jinja region; and the variables replaced."""
    if not path.endswith(".py"):
        return replace_variables(text, table)
    tree = parse_python(text)
    if tree is None:
        return text, set()
    in_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    spans: list[tuple[int, int, int, int, str]] = []
    replaced: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if id(node) in in_fstrings or not any(reads_variable(node.value, v) for v in table):
            continue
        source = ast.get_source_segment(text, node)
        if source is None:
            continue
        new_source, done = replace_variables(source, table)
        new_value, _ = replace_variables(node.value, table)
        try:
            same = ast.literal_eval(f"(\n{new_source}\n)") == new_value
        except (ValueError, SyntaxError):
            same = False
        if same and done:  # the literal's source and value agree: no escape got in the way
            spans.append((*span_of(node), new_source))
            replaced |= done
    after = replace_spans(text, spans)
    return (after, replaced) if parse_python(after) is not None else (text, set())

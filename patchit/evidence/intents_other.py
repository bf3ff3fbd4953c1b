"""What a change meant in dbt YAML (ruamel) and in Python (`ast`): the intents of one file.

YAML: the models of a properties file and their columns. A column (or model) gone and a new
one in the same place with the same tests and description is renamed; otherwise added or
removed. A file that does not parse after the change (a lost indent, an open quote) has no
intents: those are slips.

Python: tasks added to a DAG (a new `task_id="..."`, a new `@task` function), a parameter of
a function renamed in place, a function or a record's key renamed (`py_renames`), a module
constant's literal changed, and an Airflow 2 idiom the change introduced (`schedule_interval`,
`execution_date`, `days_ago`, ...). The idiom is an intent a report lists, not one a
candidate must keep: moving it forward to Airflow 3 is the fix.
"""

from __future__ import annotations

import ast
import io
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.evidence.py_renames import (
    defines_function,
    function_keys,
    function_renames,
    key_renames,
)
from patchit.text.python_source import parse_python

AIRFLOW2_IDIOMS = (
    "schedule_interval", "execution_date", "next_execution_date", "prev_execution_date",
    "days_ago", "provide_context", "DummyOperator", "tomorrow_ds", "yesterday_ds", "next_ds",
    "prev_ds",
)  # fmt: skip


@dataclass(frozen=True)
class OtherIntent:
    kind: str
    old: str = ""
    new: str = ""
    scope: str = ""  # the model (YAML) or the function (Python) it is in


# -- YAML -----------------------------------------------------------------------------------


def _load(text: str) -> Any:
    try:
        return YAML(typ="safe", pure=True).load(io.StringIO(text))
    except (YAMLError, ValueError, TypeError):
        return None


def yaml_models(text: str) -> dict[str, list[dict[str, Any]]] | None:
    """model name -> its column entries; None when the YAML does not parse."""
    data = _load(text)
    if data is None:
        return None
    if not isinstance(data, dict):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for model in data.get("models") or []:
        if isinstance(model, dict) and isinstance(model.get("name"), str):
            columns = [c for c in model.get("columns") or [] if isinstance(c, dict)]
            found[model["name"]] = [c for c in columns if isinstance(c.get("name"), str)]
    return found


def _rest(entry: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in entry.items() if k != "name"))


def yaml_intents(before: str, after: str) -> list[OtherIntent]:
    was, now = yaml_models(before), yaml_models(after)
    if was is None or now is None:
        return []
    found: list[OtherIntent] = []
    for name in now.keys() & was.keys():
        old_cols = {c["name"]: c for c in was[name]}
        new_cols = {c["name"]: c for c in now[name]}
        gone = [c for c in old_cols if c not in new_cols]
        new = [c for c in new_cols if c not in old_cols]
        for old in list(gone):
            same = [n for n in new if _rest(new_cols[n]) == _rest(old_cols[old])]
            if len(same) == 1 or (len(gone) == 1 and len(new) == 1):
                target = same[0] if len(same) == 1 else new[0]
                found.append(OtherIntent("column_renamed", old, target, name))
                gone.remove(old)
                new.remove(target)
        found += [OtherIntent("column_removed", old=c, scope=name) for c in gone]
        found += [OtherIntent("column_added", new=c, scope=name) for c in new]
    gone_models = [m for m in was if m not in now]
    new_models = [m for m in now if m not in was]
    if len(gone_models) == 1 and len(new_models) == 1:
        found.append(OtherIntent("model_renamed", gone_models[0], new_models[0]))
    return found


def yaml_holds(intent: OtherIntent, text: str) -> bool:
    models = yaml_models(text)
    if models is None:
        return True
    if intent.kind == "model_renamed":
        return intent.new in models and intent.old not in models
    columns = {c["name"] for c in models.get(intent.scope, [])}
    if intent.scope not in models:
        return True  # the model itself went: another intent says so
    if intent.kind == "column_renamed":
        return intent.new in columns and intent.old not in columns
    if intent.kind == "column_added":
        return intent.new in columns
    if intent.kind == "column_removed":
        return intent.old not in columns
    return True


# -- Python ---------------------------------------------------------------------------------


def _tree(text: str) -> ast.Module | None:
    return parse_python(text)


def task_ids(tree: ast.Module) -> set[str]:
    """`task_id="..."` keywords and `@task`-decorated functions."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "task_id" and isinstance(kw.value, ast.Constant):
                    found.add(str(kw.value.value))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if _names_task(target):
                    found.add(node.name)
    return found


def _names_task(target: ast.expr) -> bool:
    """`@task`, `@task(...)`, `@task.python`, `@dag_module.task`."""
    if isinstance(target, ast.Name):
        return target.id == "task"
    if isinstance(target, ast.Attribute):
        return target.attr == "task" or (
            isinstance(target.value, ast.Name) and target.value.id == "task"
        )
    return False


def _constants(tree: ast.Module) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = repr(node.value.value)
    return found


def _params(tree: ast.Module) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(node.name, [a.arg for a in node.args.args + node.args.kwonlyargs])
    return found


def _idioms(text: str) -> dict[str, int]:
    return {i: text.count(i) for i in AIRFLOW2_IDIOMS if i in text}


def python_intents(before: str, after: str) -> list[OtherIntent]:
    was, now = _tree(before), _tree(after)
    found: list[OtherIntent] = []
    if was is not None and now is not None:
        found += [OtherIntent("task_added", new=t) for t in sorted(task_ids(now) - task_ids(was))]
        old_params, new_params = _params(was), _params(now)
        for func in sorted(old_params.keys() & new_params.keys()):
            a, b = old_params[func], new_params[func]
            if len(a) == len(b):
                found += [OtherIntent("parameter_renamed", x, y, func)
                          for x, y in zip(a, b, strict=True) if x != y and x not in b]  # fmt: skip
        old_consts, new_consts = _constants(was), _constants(now)
        for name in sorted(old_consts.keys() & new_consts.keys()):
            if old_consts[name] != new_consts[name]:
                found.append(OtherIntent("literal_changed", old_consts[name], new_consts[name],
                                         name))  # fmt: skip
    found += [OtherIntent(f"{r.kind}_renamed", r.old, r.new, r.owner)
              for r in [*function_renames(before, after), *key_renames(before, after)]]  # fmt: skip
    old_idioms, new_idioms = _idioms(before), _idioms(after)
    for idiom, count in new_idioms.items():
        if count > old_idioms.get(idiom, 0):
            found.append(OtherIntent("airflow2_idiom", new=idiom))
    return found


def python_holds(intent: OtherIntent, text: str) -> bool:
    tree = _tree(text)
    if tree is None:
        return True
    if intent.kind == "task_added":
        return intent.new in task_ids(tree)
    if intent.kind == "parameter_renamed":
        params = _params(tree).get(intent.scope)
        return params is None or intent.old not in params
    if intent.kind == "literal_changed":
        return _constants(tree).get(intent.scope) != intent.old
    if intent.kind == "function_renamed":  # the old name defined again
        return not defines_function(text, intent.old, intent.scope)
    if intent.kind == "key_renamed":  # the function builds the old key again
        keys = function_keys(text, intent.scope)
        return keys is None or intent.old not in keys or intent.new in keys
    return True  # an Airflow 2 idiom: moving it forward is the fix, not a revert

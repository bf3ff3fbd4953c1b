"""Evidence for one failed Airflow task (or a DAG file that failed to import).

It reads the DAG file, finds the task's Python callable in it with `ast` (a TaskFlow `@task`
function or a `python_callable=` of a classic operator), the repository modules the DAG
imports, the traceback's in-repo frames, a packed log, rendered template fields the event
carries, and git history. Nothing here imports Airflow or runs the DAG: a broken DAG must be
describable too. Missing pieces become `notes`; the result is redacted before it is returned.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.conversion import find_conversion
from patchit.evidence.gitlog import (
    breaking_diff_or_note,
    change_base,
    history_and_changes,
    on_this_line,
)
from patchit.evidence.model import Evidence
from patchit.evidence.pylog import (
    exception_chain,
    pack_log,
    parse_frames,
    read_log_tail,
    repo_frames,
    repo_runtime_frame,
)
from patchit.evidence.redact import environment_secrets, redact_model
from patchit.text.inputs import as_path, read_input_text_or_none
from patchit.text.python_source import parse_python

MODULES_BUDGET_CHARS = 60_000
MODULE_MAX_CHARS = 30_000
_TASK_DECORATORS = {"task", "python", "virtualenv", "external_python", "branch", "short_circuit"}


def read_repo_text(repo_root: Path, rel: str) -> str | None:
    """A repo file's text; None when missing, not UTF-8, not a regular file, or outside the
    repository."""
    if "\x00" in rel:
        return None
    root = repo_root.resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        return None
    return read_input_text_or_none(path)


def parse_module(source: str) -> ast.Module | None:
    return parse_python(source)


def _decorator_task_id(decorator: ast.expr, default: str) -> str | None:
    """The task_id a decorator gives its function, or None if it is not a task decorator."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    names = []
    while isinstance(target, ast.Attribute):
        names.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        names.append(target.id)
    if not names or names[-1] != "task" or not _TASK_DECORATORS.issuperset(names):
        return None
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            if keyword.arg == "task_id" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return default


def _segment(source: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = source.splitlines()
    return "\n".join(lines[first - 1 : node.end_lineno]) + "\n"


def find_task_callable(source: str, task_id: str) -> tuple[str, str] | None:
    """(function name, its source) of the task `task_id` in a DAG file, or None."""
    tree = parse_module(source)
    if tree is None:
        return None
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.setdefault(node.name, node)
            for decorator in node.decorator_list:
                if _decorator_task_id(decorator, node.name) == task_id:
                    return node.name, _segment(source, node)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        args = {k.arg: k.value for k in node.keywords if k.arg}
        tid, func = args.get("task_id"), args.get("python_callable")
        if isinstance(tid, ast.Constant) and tid.value == task_id and isinstance(func, ast.Name):
            found = functions.get(func.id)
            return (func.id, _segment(source, found)) if found else (func.id, "")
    return None


def imported_modules(source: str, package: str = "") -> list[str]:
    """Dotted names of the modules a file imports (anywhere in it, relative ones resolved)."""
    tree = parse_module(source)
    names: list[str] = []
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return [n for n in dict.fromkeys(names) if n]


def resolve_module(name: str, search: list[Path], repo_root: Path) -> str | None:
    """The repo file that defines module `name` (a.b -> a/b.py or a/b/__init__.py)."""
    rel = Path(*name.split("."))
    for base in search:
        for candidate in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
            if candidate.is_file():
                try:
                    return candidate.resolve().relative_to(repo_root.resolve()).as_posix()
                except ValueError:
                    continue
    return None


def dags_folder_of(event: UniversalFailureEvent, repo_root: Path, dag_rel: str | None) -> Path:
    """The DAG folder in `repo_root`: from the event, else a `dags` ancestor, else the file's."""
    folder = event.context.get("dags_folder")
    if isinstance(folder, str) and event.repo_path:
        rel = os.path.relpath(os.path.normpath(folder), os.path.normpath(event.repo_path))
        if not rel.startswith(".."):
            return repo_root / rel
    if dag_rel:
        dag_file = repo_root / dag_rel
        return next((p for p in dag_file.parents if p.name == "dags"), dag_file.parent)
    return repo_root


def _dag_rel(event: UniversalFailureEvent) -> str | None:
    if event.unit_path:
        return event.unit_path
    dag_file = event.context.get("dag_file")
    if isinstance(dag_file, str) and event.repo_path:
        rel = os.path.relpath(os.path.normpath(dag_file), os.path.normpath(event.repo_path))
        return None if rel.startswith("..") else rel
    return None


def _package_of(rel: str, folder: Path, repo_root: Path) -> str:
    """The dotted package of a repo file as imported from `folder` ('' when outside it)."""
    try:
        inside = (repo_root / rel).resolve().relative_to(folder.resolve())
    except ValueError:
        return ""
    return ".".join(inside.parent.parts)


def collect_modules(
    repo_root: Path, start: list[str], search: list[Path], budget_chars: int
) -> dict[str, str]:
    """Repo modules imported by the `start` files (one level deep), path -> text, to a budget."""
    found: dict[str, str] = {}
    used = 0
    for rel in start:
        text = read_repo_text(repo_root, rel) or ""
        for name in imported_modules(text, _package_of(rel, search[0], repo_root)):
            path = resolve_module(name, search, repo_root)
            if path is None or path in found or path in start:
                continue
            module_text = read_repo_text(repo_root, path)
            if module_text is None or not module_text.strip():
                continue  # an empty __init__.py says nothing
            if used + min(len(module_text), MODULE_MAX_CHARS) > budget_chars:
                continue
            found[path] = module_text[:MODULE_MAX_CHARS]
            used += len(found[path])
    return found


def _rendered(event: UniversalFailureEvent) -> dict[str, str]:
    for key in ("rendered_fields", "rendered_template_fields", "rendered_templates"):
        value = event.context.get(key)
        if isinstance(value, dict):
            return {str(k): str(v)[:4000] for k, v in value.items()}
    return {}


def _log_text(event: UniversalFailureEvent) -> str | None:
    """A local task log file's tail (Airflow 3 gives a URL: then the traceback is the log)."""
    location = as_path(event.log_location)
    if location is None or "://" in str(location):
        return None
    return read_log_tail(location)


def gather_airflow_evidence(
    event: UniversalFailureEvent, repo_root: Path, *, last_good_commit: str | None = None
) -> Evidence:
    """Gather, then redact, the evidence for a failed Airflow task; BadInputError only for
    repo_root."""
    if not repo_root.is_dir():
        raise BadInputError(f"{repo_root}: repository root is not a directory; pass the git root")
    notes: list[str] = []
    last_good_commit = on_this_line(repo_root, last_good_commit, event, notes)
    dag_rel = _dag_rel(event)
    dag_text = read_repo_text(repo_root, dag_rel) if dag_rel else None
    if dag_rel is None:
        notes.append("the event names no DAG file inside the repository")
    elif dag_text is None:
        notes.append(f"DAG file {dag_rel} not readable in {repo_root}")
    roots = [Path(p) for p in (event.repo_path, str(repo_root)) if p]
    traceback_text = event.traceback or event.log_excerpt or ""
    frames = repo_frames(parse_frames(traceback_text), roots)
    runtime = repo_runtime_frame(event.runtime_locals, roots, notes)
    chain = exception_chain(traceback_text)
    final = f"{event.error_type}: {event.error_message}" if event.error_type else ""
    final = final or event.error_message or (chain[-1] if chain else "")
    causes = [f"caused by: {c}" for c in chain[:-1] if event.error_message not in c]
    error = "\n".join([final, *causes[-3:]]).strip()

    callable_name = callable_code = None
    if dag_text is not None and event.status != "import_error":
        found = find_task_callable(dag_text, event.unit_id)
        if found is None:
            notes.append(f"no callable for task {event.unit_id} found in {dag_rel}")
        else:
            callable_name, callable_code = found[0], found[1] or None
    folder = dags_folder_of(event, repo_root, dag_rel)
    search = [folder, *([(repo_root / dag_rel).parent] if dag_rel else []), repo_root]
    search = list(dict.fromkeys(search))
    frame_files = [f.path for f in frames if f.path != dag_rel]
    starts = [p for p in [dag_rel, *frame_files] if p]
    modules = collect_modules(repo_root, list(dict.fromkeys(starts)), search, MODULES_BUDGET_CHARS)
    for path in frame_files:  # the files the traceback ran through always count
        if path not in modules and (text := read_repo_text(repo_root, path)) is not None:
            modules[path] = text[:MODULE_MAX_CHARS]

    history_paths = list(dict.fromkeys(starts))
    git_log, changed = history_and_changes(
        repo_root, history_paths, last_good_commit, event.commit or "HEAD", notes
    )
    packed = pack_log(
        error, frames, lambda rel: read_repo_text(repo_root, rel), log_text=_log_text(event),
        runtime=runtime,
    )  # fmt: skip
    evidence = Evidence(
        event=event,
        repo_root=str(repo_root),
        unit_path=dag_rel,
        unit_name=event.unit_id,
        raw_code=dag_text,
        error=error,
        git_log=git_log,
        changed_files=changed,
        last_good_commit=last_good_commit,
        # before notes=: a missing diff adds a note (keyword arguments evaluate in order)
        breaking_diff=breaking_diff_or_note(
            repo_root, last_good_commit, event.commit or "HEAD", history_paths, notes
        ),
        notes=list(dict.fromkeys(notes)),
        related_code=modules,
        frames=frames,
        callable_name=callable_name,
        callable_code=callable_code,
        packed_log=packed,
        rendered_fields=_rendered(event),
        runtime_locals=runtime,
        change_base=change_base(repo_root, last_good_commit, event.commit or "HEAD"),
    )
    evidence.conversion = find_conversion(evidence, repo_root, None)
    return redact_model(evidence, environment_secrets())

"""The Airflow side of the Airflow harness: runs inside a child process with Airflow imported.

`run_request(request)` checks that the DAG file imports, then runs the failed task, the other
failed tasks of its incident (`related_task_ids`) and their upstream tasks (so the XComs they
pull exist) in one `dag.test()` on a subset of the DAG, with retries forced to 0 and patchit's
own callbacks removed, and reads the outcome from the task instances' final states. It is
called either by `python -m patchit.harnesses.airflow.runner REQUEST RESULT` (a fresh
process) or in a child forked by the warm parent (`patchit.harnesses.airflow.fork`). The
environment (AIRFLOW_HOME, metadata DB, dags folder) is set by the caller before Airflow reads
it.

Request: {"dag_file", "dags_folder", "dag_id", "task_id", "related_task_ids", "map_index",
          "logical_date", "import_only" (a broken DAG file: the import check is the whole test)}.
Result:  {"stage": "import" | "run" | "done", "passed" (every task of the incident passed),
          "import_error", "states", "units": {task_id: its verdict}, "error",
          "xcom": {"task[.map].key": sha256}, "xcom_text": {same keys: value, clipped},
          "files": {"root/<path>" | "scratch/<path>": sha256}, "files_head": {...: first bytes}}.
The outputs (XComs of the run, files created or changed under the worktree and the scratch
dir) are what the data check compares with a baseline run; worktree and scratch paths inside
them are replaced by `<root>` / `<scratch>`, so runs in different sandboxes compare equal.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

# Task states that count as the unit having run cleanly.
PASSING_STATES = frozenset({"success", "skipped"})
SCAN_MAX_FILES = 20_000  # a repo larger than this is scanned only this far for written files
HEAD_CHARS = 300
_SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", "dbt_packages"})


def check_import(dag_file: str, dags_folder: str) -> tuple[Any, str | None]:
    """Parse one DAG file the way the DAG processor does: (the DagBag, its import error)."""
    from pathlib import Path

    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(
        dag_folder=dag_file,
        bundle_path=Path(dags_folder),
        bundle_name="dags-folder",
        safe_mode=False,
    )
    errors = [f"{path}:\n{message}" for path, message in bag.import_errors.items()]
    return bag, "\n".join(errors) or None


def _is_patchit_callback(callback: Any) -> bool:
    return str(getattr(callback, "__module__", "") or "").startswith("patchit.")


def strip_patchit_callbacks(holder: Any) -> None:
    """Drop patchit's own failure callback: a sandbox failure is not a new incident."""
    for attr in ("on_failure_callback", "on_retry_callback", "on_success_callback"):
        callbacks = getattr(holder, attr, None)
        if callbacks is None:
            continue
        if isinstance(callbacks, list):
            kept = [c for c in callbacks if not _is_patchit_callback(c)]
            if len(kept) != len(callbacks):
                setattr(holder, attr, kept)
        elif _is_patchit_callback(callbacks):
            setattr(holder, attr, None)


def prepare_subset(dag: Any, task_id: str | list[str]) -> Any:
    """The failed task(s) and their upstream tasks, no retries, no patchit callbacks."""
    task_ids = [task_id] if isinstance(task_id, str) else list(task_id)
    subset = dag.partial_subset(task_ids=task_ids, include_upstream=True, include_downstream=False)
    strip_patchit_callbacks(subset)
    for task in subset.tasks:
        task.retries = 0
        strip_patchit_callbacks(task)
    return subset


def read_states(dag_run: Any) -> dict[str, str]:
    """task_id[map_index] -> final state, from the metadata DB."""
    states: dict[str, str] = {}
    for ti in dag_run.get_task_instances():
        key = ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"
        states[key] = str(getattr(ti.state, "value", ti.state))
    return states


def own_states(states: dict[str, str], task_id: str, map_index: int | None) -> list[str]:
    """The final states of one task's instances (its mapped instance, if one failed)."""
    return [
        state
        for key, state in states.items()
        if key == task_id
        or (key.startswith(f"{task_id}[") and map_index is None)
        or key == f"{task_id}[{map_index}]"
    ]


def judge_states(states: dict[str, str], task_id: str, map_index: int | None) -> bool:
    """Passed iff the failed task (its mapped instance, if one failed) and everything it ran
    with ended in a passing state."""
    own = own_states(states, task_id, map_index)
    return bool(own) and all(state in PASSING_STATES for state in states.values())


def task_verdicts(
    states: dict[str, str], task_ids: list[str], map_index: int | None
) -> dict[str, str]:
    """Each failed task of the incident and how it ended: `success`, its worst state, or
    `not run`. (`map_index` is the first task's failed instance; the others are judged on all
    their instances.)"""
    verdicts = {}
    for number, task_id in enumerate(task_ids):
        own = own_states(states, task_id, map_index if number == 0 else None)
        bad = [state for state in own if state not in PASSING_STATES]
        verdicts[task_id] = bad[0] if bad else own[0] if own else "not run"
    return verdicts


def run_request(request: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"stage": "import", "passed": False, "states": {}}
    started = time.monotonic()
    bag, import_error = check_import(request["dag_file"], request["dags_folder"])
    result["import_ms"] = int((time.monotonic() - started) * 1000)
    if import_error:
        result["import_error"] = import_error
        return result
    if request.get("import_only"):
        # a broken DAG file (from `patchit airflow scan`): no task ran, importing is the test
        result.update(stage="done", passed=bool(bag.dags), dags=sorted(bag.dags))
        if not bag.dags:
            result["import_error"] = f"{request['dag_file']} imports but defines no DAG"
        return result
    dag = bag.dags.get(request["dag_id"])
    if dag is None:
        found = ", ".join(sorted(bag.dags)) or "none"
        result["import_error"] = (
            f"DAG {request['dag_id']!r} not found in {request['dag_file']} (found: {found})"
        )
        return result
    task_ids = list(dict.fromkeys([request["task_id"], *request.get("related_task_ids", [])]))
    if missing := [t for t in task_ids if t not in dag.task_dict]:
        result["import_error"] = (
            f"task {', '.join(map(repr, missing))} not found in DAG {dag.dag_id!r}"
        )
        return result
    result["stage"] = "run"
    subset = prepare_subset(dag, task_ids)
    logical_date = request.get("logical_date")
    roots = output_roots()
    before = scan_files(roots)
    dag_run = subset.test(
        logical_date=datetime.fromisoformat(logical_date) if logical_date else None
    )
    states = read_states(dag_run)
    units = task_verdicts(states, task_ids, request.get("map_index"))
    result.update(
        stage="done",
        states=states,
        units=units,
        passed=judge_states(states, request["task_id"], request.get("map_index"))
        and all(state in PASSING_STATES for state in units.values()),
        run_ms=int((time.monotonic() - started) * 1000),
    )
    try:
        result.update(read_xcoms(dag_run, roots))
        result.update(written_files(roots, before))
    except Exception as exc:  # the outputs serve the data check; the run's verdict stands
        result["outputs_error"] = _format(exc)[-2000:]
    return result


# -- outputs for the data check -------------------------------------------------------------


def output_roots() -> dict[str, Path]:
    """Where a sandboxed task may write: the worktree (the run's cwd) and the scratch dir
    (the parent of the isolated AIRFLOW_HOME), by label."""
    roots = {"root": Path.cwd()}
    home = os.environ.get("AIRFLOW_HOME")
    if home:
        roots["scratch"] = Path(home).parent
    return roots


def normalise(text: str, roots: dict[str, Path]) -> str:
    """Sandbox paths replaced by `<label>`, longest first (the scratch may sit in the root)."""
    paths = {str(p): label for label, p in roots.items()}
    paths |= {str(p.resolve()): label for label, p in roots.items()}
    for path in sorted(paths, key=len, reverse=True):
        text = text.replace(path, f"<{paths[path]}>")
    return text


def _skipped(path: Path, roots: dict[str, Path]) -> bool:
    home = os.environ.get("AIRFLOW_HOME")
    if home and (path == Path(home) or Path(home) in path.parents):
        return True  # Airflow's own metadata DB and logs
    scratch = roots.get("scratch")
    return path.parent == scratch and path.name.startswith("airflow_")  # request/result/log


def scan_files(roots: dict[str, Path]) -> dict[str, tuple[int, int]]:
    """label/relpath -> (mtime_ns, size) of the files under the roots, bounded."""
    seen: dict[str, tuple[int, int]] = {}
    for label, root in roots.items():
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = [
                d for d in dirnames if d not in _SKIP_DIRS and not _skipped(here / d, roots)
            ]
            for name in filenames:
                path = here / name
                if len(seen) >= SCAN_MAX_FILES or _skipped(path, roots):
                    continue
                try:
                    st = path.stat()
                except OSError:
                    continue
                key = f"{label}/{path.relative_to(root).as_posix()}"
                seen.setdefault(key, (st.st_mtime_ns, st.st_size))
    return seen


def written_files(roots: dict[str, Path], before: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Content hashes (sandbox paths normalised) of files created or changed by the run."""
    files: dict[str, str] = {}
    heads: dict[str, str] = {}
    for key, stamp in scan_files(roots).items():
        if before.get(key) == stamp:
            continue
        label, rel = key.split("/", 1)
        try:
            data = (roots[label] / rel).read_bytes()
        except OSError:
            continue
        try:
            text = normalise(data.decode("utf-8"), roots)
        except UnicodeDecodeError:
            files[key] = hashlib.sha256(data).hexdigest()
            heads[key] = f"(binary, {len(data)} bytes)"
            continue
        files[key] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        heads[key] = text[:HEAD_CHARS]
    return {"files": files, "files_head": heads}


def read_xcoms(dag_run: Any, roots: dict[str, Path]) -> dict[str, Any]:
    """Every XCom the run pushed (return values included), as normalised JSON and its hash."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(XComModel.task_id, XComModel.map_index, XComModel.key, XComModel.value).where(
        XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id
    )
    hashes: dict[str, str] = {}
    texts: dict[str, str] = {}
    with create_session() as session:
        for task_id, map_index, key, value in session.execute(query).all():
            index = -1 if map_index is None else int(str(map_index))
            task = task_id if index < 0 else f"{task_id}[{index}]"
            text = normalise(json.dumps(value, sort_keys=True, default=str), roots)
            hashes[f"{task}.{key}"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
            texts[f"{task}.{key}"] = text[:HEAD_CHARS]
    return {"xcom": hashes, "xcom_text": texts}


def run_to_file(request_path: str, result_path: str) -> int:
    """Run one request, write its result JSON; an exception is a result, not a crash."""
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    try:
        result = run_request(request)
    except BaseException as exc:  # report anything, SystemExit from a DAG included
        result = {"stage": "error", "passed": False, "states": {}, "error": _format(exc)}
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-8000:]


if __name__ == "__main__":
    sys.exit(run_to_file(sys.argv[1], sys.argv[2]))

"""The Airflow side of the Airflow harness: runs inside a child process with Airflow imported.

`run_request(request)` checks that the DAG file imports, then runs the failed task with its
upstream tasks (so the XComs it pulls exist) through `dag.test()` on a subset of the DAG, with
retries forced to 0 and patchit's own callbacks removed, and reads the outcome from the task
instances' final states. It is called either by `python -m patchit.harnesses.airflow_runner
REQUEST RESULT` (a fresh process) or in a child forked by the warm parent
(`patchit.harnesses.airflow_fork`). The environment (AIRFLOW_HOME, metadata DB, dags folder) is
set by the caller before Airflow reads it.

Request: {"dag_file", "dags_folder", "dag_id", "task_id", "map_index", "logical_date",
          "import_only" (a broken DAG file: the import check is the whole test)}.
Result:  {"stage": "import" | "run" | "done", "passed", "import_error", "states", "error"}.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from datetime import datetime
from typing import Any

# Task states that count as the unit having run cleanly.
PASSING_STATES = frozenset({"success", "skipped"})


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


def prepare_subset(dag: Any, task_id: str) -> Any:
    """The failed task and its upstream tasks, no retries, no patchit callbacks."""
    subset = dag.partial_subset(task_ids=[task_id], include_upstream=True, include_downstream=False)
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


def judge_states(states: dict[str, str], task_id: str, map_index: int | None) -> bool:
    """Passed iff the failed task (its mapped instance, if one failed) and everything it ran
    with ended in a passing state."""
    own = [
        state
        for key, state in states.items()
        if key == task_id
        or (key.startswith(f"{task_id}[") and map_index is None)
        or key == f"{task_id}[{map_index}]"
    ]
    return bool(own) and all(state in PASSING_STATES for state in states.values())


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
    if request["task_id"] not in dag.task_dict:
        result["import_error"] = f"task {request['task_id']!r} not found in DAG {dag.dag_id!r}"
        return result
    result["stage"] = "run"
    subset = prepare_subset(dag, request["task_id"])
    logical_date = request.get("logical_date")
    dag_run = subset.test(
        logical_date=datetime.fromisoformat(logical_date) if logical_date else None
    )
    states = read_states(dag_run)
    result.update(
        stage="done",
        states=states,
        passed=judge_states(states, request["task_id"], request.get("map_index")),
        run_ms=int((time.monotonic() - started) * 1000),
    )
    return result


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

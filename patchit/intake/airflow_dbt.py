"""An Airflow task that ran dbt is a dbt failure: read that project's run results instead.

The callback marks such a task `runs_dbt` (a BashOperator calling `dbt build|run|test`, a
Cosmos operator) with the project dir. Here the worker turns the Airflow event into the dbt
events of that run, so it is healed as one dbt incident, not as an Airflow one as well. Only
a `run_results.json` written after the task started is used: a stale one belongs to another run.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.intake.dbt import events_from_run, record_from_run_results
from patchit.text.dbt_args import option_value
from patchit.text.inputs import as_list, as_path, is_regular_file, read_input_json_or_none

# without the task's start time, accept results written shortly before the failure only
UNKNOWN_START_WINDOW = timedelta(hours=1)


def _project_dir(event: UniversalFailureEvent) -> Path | None:
    raw = event.context.get("dbt_project_dir")
    repo = as_path(event.repo_path)
    if not raw:
        return repo if repo and is_regular_file(repo / "dbt_project.yml") else None
    path = as_path(str(raw))
    if path is None:
        return None
    with contextlib.suppress(RuntimeError):  # `~nobody`: a home that cannot be found
        path = path.expanduser()
    if not path.is_absolute():
        if repo is None:
            return None
        path = repo / path
    try:
        path = path.resolve()
    except (OSError, RuntimeError):
        return None
    return path if is_regular_file(path / "dbt_project.yml") else None


def _task_started(event: UniversalFailureEvent) -> datetime:
    raw = event.context.get("task_started_utc")
    if isinstance(raw, str):
        try:
            started = datetime.fromisoformat(raw)
            started.timestamp()  # a naive date far out of range fails here, not later
            return started
        except (ValueError, OverflowError, OSError):
            pass
    return event.created_utc - UNKNOWN_START_WINDOW


def _read_json(path: Path) -> dict[str, Any] | None:
    data = read_input_json_or_none(path)
    return data if isinstance(data, dict) else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except (OSError, ValueError):
        return 0.0


def dbt_events_from_airflow(event: UniversalFailureEvent) -> list[UniversalFailureEvent] | None:
    """The failed dbt nodes of the run an Airflow task made; None if it did not run dbt or
    left no fresh run results (then it is handled as an Airflow task failure)."""
    if not event.context.get("runs_dbt") or event.repo_path is None:
        return None
    project = _project_dir(event)
    if project is None:
        return None
    args = [str(a) for a in as_list(event.context.get("dbt_args")) or ["build"]]
    target = project / (option_value(args, "--target-path") or "target")
    run_results = target / "run_results.json"
    started = _task_started(event)
    if not is_regular_file(run_results) or _mtime(run_results) < started.timestamp() - 1:
        return None
    results = _read_json(run_results)
    if results is None:
        return None
    record = record_from_run_results(results, _read_json(target / "manifest.json"))
    cwd = as_path(str(event.context.get("dbt_cwd") or "")) or project
    args = _absolute_dirs(args, cwd, project)
    try:
        events = events_from_run(
            record, args, project, Path(event.repo_path), event.commit, started
        )
    except BadInputError:
        return None
    origin = {
        "dag_id": event.pipeline_id,
        "task_id": event.unit_id,
        "run_id": event.run_id,
        "try_number": event.try_number,
        "event_id": event.event_id,
        "bundle_name": event.context.get("bundle_name"),  # its repository's name on every host
    }
    converted = []
    for dbt_event in events:
        assert dbt_event.dbt is not None
        invocation = dbt_event.dbt.model_copy(update={"cwd": str(project)})
        converted.append(
            dbt_event.model_copy(
                update={
                    "dbt": invocation,
                    "logical_date": event.logical_date,
                    "context": {**dbt_event.context, "airflow": origin},
                }
            )
        )
    return converted


def _absolute_dirs(args: list[str], cwd: Path, project: Path) -> list[str]:
    """`--project-dir`/`--profiles-dir` made absolute: the worker does not run in the task's cwd."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("--project-dir", "--profiles-dir") and i + 1 < len(args):
            value = project if arg == "--project-dir" else as_path(args[i + 1]) or cwd
            with contextlib.suppress(RuntimeError):  # `~nobody`
                value = value.expanduser()
            out += [arg, str(value if value.is_absolute() else (cwd / value).resolve())]
            skip = True
            continue
        out.append(arg)
    if "--project-dir" not in out:
        out += ["--project-dir", str(project)]
    return out

"""The Airflow failure callback: turn a failed task's context into an event dict and spool it.

    from patchit.integrations.airflow import on_failure_callback
    default_args = {"on_failure_callback": on_failure_callback}

or `make_failure_callback(home=..., repos={"bundle": "/repo"}, extra={...})` for options.

It runs in the task process after the terminal state was sent, or in the DAG processor with a
`reason` instead of an `exception` for killed and timed-out tasks. It must be cheap and safe:
standard library only (this module and what it imports), one INSERT into the SQLite spool
(which redacts secrets before writing: `patchit.text.redaction`), never raises into Airflow (not
even a `SystemExit` from a property of the context; only `KeyboardInterrupt` passes), never
heals here (`patchit worker` does). The dict it writes
validates as `patchit.events.model.UniversalFailureEvent` (schema_version 1).

With `[airflow] heal = "dag"` (or `PATCHIT_AIRFLOW_HEAL=dag`) it triggers the `patchit_heal`
DAG through the Airflow REST API with the event as the run's conf instead
(`patchit.integrations.airflow_trigger`), and spools when that fails, so no failure is lost.
A failure of the heal DAG itself is neither triggered nor spooled.

On a full disk the event is held in memory and tried again a few times, then said on stderr
(`patchit.integrations.airflow_keep`).

It also records the failing frame's locals as names and types (`runtime_locals`, see
`patchit.intake.frame_locals`: a CSV row's keys, an object's attributes, never a value), read
from the exception's traceback while it is still alive; `PATCHIT_CAPTURE_LOCALS=0` or
`make_failure_callback(capture_locals=False)` turns that off. A capture that fails is noted
in the event's context (`runtime_locals_error`), never raised.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import traceback
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.intake.frame_locals import failing_frame_locals
from patchit.intake.gitinfo import find_git_root, read_branch, read_head, read_remote_url
from patchit.integrations.airflow_keep import keep as _keep
from patchit.integrations.airflow_trigger import (
    DEFAULT_HEAL_DAG_ID,
    HealSettings,
    TriggerFailed,
    is_heal_dag,
    resolve_heal_settings,
    trigger_heal,
)
from patchit.state.home import resolve_home
from patchit.text.dbt_args import dbt_args_in_shell, option_value, runs_dbt_in_shell
from patchit.text.redaction import clean_text, redact

DISABLE_ENV = "PATCHIT_CALLBACK_DISABLED"
CAPTURE_LOCALS_ENV = "PATCHIT_CAPTURE_LOCALS"
MAX_MESSAGE_CHARS = 20_000
MAX_TRACEBACK_CHARS = 60_000
MAX_COMMAND_CHARS = 20_000
_log = logging.getLogger(__name__)

Callback = Callable[[Mapping[str, Any]], None]


def _warn(message: str) -> None:
    try:
        _log.warning("patchit: %s", redact(message))
    except KeyboardInterrupt:
        raise
    except BaseException:
        try:
            sys.stderr.write(f"patchit: {clean_text(message)}\n")
        except KeyboardInterrupt:
            raise
        except BaseException:
            return


# Airflow's objects are the user's: a property may raise anything, SystemExit included. Only
# KeyboardInterrupt (the user stopping the process) passes; everything else costs one field.


def _safe(func: Callable[[], Any], default: Any = None) -> Any:
    """Attribute access on Airflow objects may raise (properties, half-built instances)."""
    try:
        value = func()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return default
    return default if value is None else value


def _text(value: Any, limit: int) -> str:
    text = _safe(lambda: str(value))
    if not isinstance(text, str):
        text = _safe(lambda: repr(value))
    if not isinstance(text, str):
        text = f"<unprintable {type(value).__name__}>"
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]


def _str_or_none(value: Any) -> str | None:
    return None if value is None else _text(value, 500)


def _iso(value: Any) -> str | None:
    iso = _safe(lambda: value.isoformat())
    if not isinstance(iso, str) or _safe(lambda: datetime.fromisoformat(iso)) is None:
        return None  # not a date after all: the event must still validate
    return iso


def _plain(value: Any) -> Any:
    """A value as JSON can hold it: a number, a flag, or text (never the object itself)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    return _text(value, 500)


def _get(context: Mapping[str, Any], key: str) -> Any:
    return _safe(lambda: context.get(key))


def _exception_fields(context: Mapping[str, Any]) -> dict[str, Any]:
    exc = _get(context, "exception")
    if isinstance(exc, BaseException):
        tb = _safe(lambda: "".join(traceback.format_exception(exc)), "")
        return {
            "error_type": _text(type(exc).__name__, 200),
            "error_message": _text(exc, MAX_MESSAGE_CHARS),
            "traceback": _text(tb, MAX_TRACEBACK_CHARS) or None,
        }
    reason = _get(context, "reason")
    if reason is None and exc is not None:
        reason = exc  # some code paths pass the error as a plain string
    if reason is None:
        return {"error_type": "TaskFailure", "error_message": "task failed (no exception given)"}
    message = _text(reason, MAX_MESSAGE_CHARS)
    lowered = message.lower()
    if "timed out" in lowered or "timeout" in lowered:
        kind = "AirflowTaskTimeout"
    elif any(w in lowered for w in ("killed", "zombie", "heartbeat", "sigterm", "terminated")):
        kind = "AirflowTaskTerminated"
    else:
        kind = "TaskFailure"
    return {"error_type": kind, "error_message": message, "reason": message}


def _cd_dir(command: str) -> str | None:
    match = re.search(r"(?:^|[;&]\s*)cd\s+([^\s;&|]+)", command)
    return match.group(1).strip("'\"") if match else None


def _dbt_fields(task: Any) -> dict[str, Any]:
    """`runs_dbt` and where the dbt project is, for a BashOperator or a Cosmos operator."""
    if task is None:
        return {}
    module = type(task).__module__ or ""
    if module.startswith("cosmos"):
        project = _safe(lambda: str(task.project_dir))
        return {"runs_dbt": True, "dbt_project_dir": project, "dbt_runner": "cosmos"}
    command = _safe(lambda: task.bash_command)
    if not isinstance(command, str) or not runs_dbt_in_shell(command[:MAX_COMMAND_CHARS]):
        return {}
    command = clean_text(command[:MAX_COMMAND_CHARS])
    args = dbt_args_in_shell(command) or []
    base = _plain(_safe(lambda: task.cwd)) or _cd_dir(command)
    project = option_value(args, "--project-dir") or base
    if project and base and not os.path.isabs(project):
        project = os.path.join(base, project)
    fields: dict[str, Any] = {"runs_dbt": True, "dbt_runner": "bash", "dbt_args": args}
    fields["dbt_command"] = _text(command, 4000)
    if project:
        fields["dbt_project_dir"] = str(project)
    if base:
        fields["dbt_cwd"] = str(base)
    return fields


RENDERED_FIELD_CHARS = 2000


def _rendered_fields(task: Any) -> dict[str, str] | None:
    """The task's template fields as rendered for this run (bash_command, sql, ...), short."""
    names = _safe(lambda: tuple(task.template_fields)) or ()
    rendered: dict[str, str] = {}
    for name in names[:20]:
        value = _rendered_value(task, name)
        if value is not None:
            rendered[_text(name, 200)] = _text(value, RENDERED_FIELD_CHARS)
    return rendered or None


def _rendered_value(task: Any, name: Any) -> Any:
    """One template field's value, None when empty or when reading it raised."""
    value = _safe(lambda: getattr(task, str(name)))
    empty = _safe(lambda: value in ("", [], {}), True)
    return None if empty else value


def _repo_fields(
    fileloc: str | None, bundle: str | None, repos: Mapping[str, str]
) -> dict[str, Any]:
    root: Path | None = None
    if bundle and bundle in repos:
        root = find_git_root(repos[bundle]) or Path(repos[bundle])
    elif fileloc:
        root = find_git_root(Path(fileloc).parent)
    if root is None:
        return {}
    fields: dict[str, Any] = {"repo_path": str(root), "commit": read_head(root)}
    if remote := read_remote_url(root):
        fields["repo_url"] = remote  # other hosts' clones of it share its incidents
    if fileloc:
        try:
            fields["unit_path"] = Path(fileloc).resolve().relative_to(root).as_posix()
        except (ValueError, OSError):
            fields["unit_path"] = None
    return fields


def _runtime_locals(
    context: Mapping[str, Any], repo_path: Any, extras: dict[str, Any]
) -> dict[str, Any] | None:
    """The failing in-repo frame's locals (names and types), or None; a failure is noted."""
    exc = _get(context, "exception")
    if not isinstance(exc, BaseException) or not isinstance(repo_path, str):
        return None
    try:
        return failing_frame_locals(exc, repo_path)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # a task's odd object must not cost the event
        extras["runtime_locals_error"] = f"{type(error).__name__}: {_text(error, 300)}"
        return None


def _triggered_by(dag_run: Any) -> str | None:
    """The run's trigger when known: `test` for a run of `airflow dags test` (Airflow 3's
    dag.test() names its user "dag_test"; the scheduler's DagRun says triggered_by=TEST),
    whose log URL points at no API server."""
    if _safe(lambda: dag_run.triggering_user_name) == "dag_test":
        return "test"
    found = _safe(lambda: dag_run.triggered_by)
    return str(getattr(found, "value", found)).lower() if found is not None else None


def build_event(
    context: Mapping[str, Any],
    repos: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    capture_locals: bool = True,
) -> dict[str, Any]:
    """The event dict for one failed task (a UniversalFailureEvent in JSON form)."""
    ti: Any = _safe(lambda: context.get("ti") or context.get("task_instance"))
    dag: Any = _safe(lambda: context.get("dag") or ti.task.dag)
    task: Any = _safe(lambda: context.get("task") or ti.task)
    dag_id = _safe(lambda: ti.dag_id) or _safe(lambda: dag.dag_id) or "unknown_dag"
    task_id = _safe(lambda: ti.task_id) or _safe(lambda: task.task_id) or "unknown_task"
    fileloc = _safe(lambda: clean_text(str(dag.fileloc)))
    bundle = _plain(_safe(lambda: ti.bundle_instance.name))
    triggered_by = _safe(lambda: _triggered_by(_get(context, "dag_run")))
    extras: dict[str, Any] = {
        "dag_file": fileloc,
        "bundle_name": bundle,
        "bundle_version": _plain(_safe(lambda: ti.bundle_instance.version)),
        # a bundle folder outside git is moved to a worker's `[repos] "bundle:NAME"` by it
        "bundle_path": _plain(_safe(lambda: clean_text(str(ti.bundle_instance.path)))),
        "operator": _text(_safe(lambda: type(task).__name__), 200) if task is not None else None,
        "task_started_utc": _iso(_safe(lambda: ti.start_date)),
        "hostname": _plain(_safe(lambda: ti.hostname)),
        "max_tries": _plain(_safe(lambda: ti.max_tries)),
        "triggered_by": triggered_by or None,
        **_safe(lambda: _dbt_fields(task), {}),
        "rendered_fields": _safe(lambda: _rendered_fields(task)),
    }
    fields = _exception_fields(context)
    if "reason" in fields:
        extras["reason"] = fields.pop("reason")
    repo: dict[str, Any] = _safe(lambda: _repo_fields(fileloc, bundle, repos or {}), {})
    if repo.get("repo_path"):
        extras["branch"] = _safe(lambda: read_branch(Path(repo["repo_path"])))
    if extra:
        extras["extra"] = dict(extra)
    runtime = None
    if capture_locals and os.environ.get(CAPTURE_LOCALS_ENV) != "0":
        runtime = _runtime_locals(context, repo.get("repo_path"), extras)
    try_number = _safe(lambda: int(ti.try_number))
    map_index = _safe(lambda: int(ti.map_index))
    return {
        "schema_version": 1,
        "event_id": uuid.uuid4().hex,
        "created_utc": datetime.now(UTC).isoformat(),
        "source": "airflow",
        "pipeline_id": _text(dag_id, 500),
        "run_id": _str_or_none(_safe(lambda: context.get("run_id") or ti.run_id)),
        "unit_id": _text(task_id, 500),
        "try_number": try_number,
        "map_index": map_index,
        "logical_date": _iso(_get(context, "logical_date")),
        "status": "error",
        "log_location": None if triggered_by == "test" else _str_or_none(_safe(lambda: ti.log_url)),
        **fields,
        **repo,
        "context": {k: v for k, v in extras.items() if v is not None},
        **({"runtime_locals": runtime} if runtime is not None else {}),
    }


def _heal_dag_failure(context: Mapping[str, Any], heal_dag_id: str | None) -> str | None:
    """The id of the heal DAG this failure belongs to, or None: its failures are not healed."""
    ti: Any = _safe(lambda: context.get("ti") or context.get("task_instance"))
    dag: Any = _safe(lambda: context.get("dag") or ti.task.dag)
    dag_id = _safe(lambda: ti.dag_id) or _safe(lambda: dag.dag_id)
    tags = _safe(lambda: list(dag.tags))
    return str(dag_id) if is_heal_dag(dag_id, tags, heal_dag_id or DEFAULT_HEAL_DAG_ID) else None


def _hand_over(event: dict[str, Any], settings: HealSettings, home: Path) -> None:
    """Trigger the heal DAG (`heal = "dag"`), else spool; a failed trigger spools, said once."""
    for problem in settings.problems:
        _warn(problem)
    if settings.mode == "dag":
        try:
            run = trigger_heal(event, settings)
        except Exception as exc:  # TriggerFailed, or a mistake of ours: the event is spooled
            why = _text(exc, 500) if isinstance(exc, TriggerFailed) else (
                f"{type(exc).__name__}: {_text(exc, 500)}")  # fmt: skip
            # said before spooling: a spool that fails says its own
            _warn(f"could not trigger {settings.dag_id} ({why}); spooling the "
                  f"failure in {home} for `patchit worker` instead")  # fmt: skip
            _keep(event, home)
            return
        if run.existed:  # the run id is the event's: this very event, handed over before
            _log.info("patchit: %s run %s already exists: this failure was handed over before",
                      settings.dag_id, run.run_id)  # fmt: skip
        else:
            _log.info("patchit: triggered %s run %s to heal this failure", settings.dag_id,
                      run.run_id)  # fmt: skip
        return
    _keep(event, home)


def make_failure_callback(
    home: str | os.PathLike[str] | None = None,
    repos: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    capture_locals: bool = True,
    heal: str | None = None,
    api_url: str | None = None,
    heal_dag_id: str | None = None,
    trigger_timeout_s: float | None = None,
) -> Callback:
    """A failure callback with options: the state dir, a DAG bundle -> repository mapping
    (`{"dags": "/srv/pipelines"}`), extra context stored with every event, whether to
    record the failing frame's locals as names and types, and how to hand the failure over
    (`heal="spool"|"dag"`, the Airflow API URL, the heal DAG's id, the trigger's timeout;
    unset: from the environment and `.patchit.toml`, see `patchit.integrations.airflow_trigger`)."""
    repo_map = dict(repos or {})
    extra_ctx = dict(extra or {})

    def patchit_failure_callback(context: Mapping[str, Any]) -> None:
        if os.environ.get(DISABLE_ENV) == "1":
            return
        try:
            if heal_dag := _heal_dag_failure(context, heal_dag_id):
                _warn(f"not healing a failure of {heal_dag}, patchit's own heal DAG "
                      "(see its task log)")  # fmt: skip
                return
            event = build_event(context, repo_map, extra_ctx, capture_locals)
            settings = resolve_heal_settings(
                event.get("repo_path"), heal, api_url, heal_dag_id, trigger_timeout_s
            )
            _hand_over(event, settings, resolve_home(home))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # never raise into Airflow: the task already failed
            _warn(f"could not spool the failure ({type(exc).__name__}: {_text(exc, 500)})")

    return patchit_failure_callback


on_failure_callback: Callback = make_failure_callback()
"""Ready to use: spools into `$PATCHIT_HOME` (default `~/.local/state/patchit`)."""


def __getattr__(name: str) -> Any:
    """`PatchitNotifier` (`on_failure_callback=[PatchitNotifier()]`), built on first use (PEP
    562): it subclasses Airflow's `BaseNotifier`, and this module stays standard library only
    for the plain callback's sake."""
    if name == "PatchitNotifier":
        from patchit.integrations.notifier_class import build_notifier_class

        built = globals()["PatchitNotifier"] = build_notifier_class(make_failure_callback, __name__)
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Runs of Airflow tasks, read through Airflow's REST API, for outcome tracking.

The dbt wrapper sees every dbt run; nothing of patchit sees an Airflow run that succeeds. So for
an Airflow incident `patchit track` asks the Airflow API server (`apache-airflow-client`,
`GET /api/v2/dags/{dag_id}/dagRuns/~/taskInstances`) for the finished task instances of the
incident's DAG and records each as a unit run, as the wrapper records dbt's results:
- the commit it ran: its DAG version's `bundle_version` when the bundle is versioned (a git
  bundle) and the repository has that commit; else the base branch's tip when the task started,
  less `[airflow] deploy_lag_s` (a DAG folder deployed from that branch);
- a failed try's fingerprint: the exception in its structured log (`error_detail`), in the
  attempt memory's terms; the incident's own fingerprint when it is the same error.

The unit of an Airflow run is `<dag_id>.<task_id>` (`unit_key`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory
from patchit.memory.fingerprint import cause_message, error_fingerprint
from patchit.memory.outcomes import UnitRun
from patchit.sandbox.git import run_git

API_TIMEOUT_S = 30.0
TOKEN_ENV = "AIRFLOW_API_TOKEN"
FINISHED = ("success", "failed")
LOOK_BACK = timedelta(days=1)  # runs before the first event: the failure as it was


def unit_key(event: UniversalFailureEvent) -> str:
    """The unit a run is recorded under: dbt's unique_id, or `<dag_id>.<task_id>`."""
    if event.source.value == "airflow":
        return f"{event.pipeline_id}.{event.unit_id}"
    return event.unit_id


@dataclass(frozen=True)
class TaskRun:
    dag_id: str
    task_id: str
    run_id: str
    try_number: int
    map_index: int
    state: str
    start: datetime
    end: datetime
    bundle_version: str | None


class AirflowApi:
    """The few calls tracking needs, over `apache-airflow-client`."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = API_TIMEOUT_S):
        try:
            from airflow_client.client import ApiClient, Configuration
            from airflow_client.client.api.task_instance_api import TaskInstanceApi
        except ImportError as exc:
            raise BadInputError(
                "tracking Airflow runs needs apache-airflow-client; install it with "
                "`pip install 'patchit[airflow]'`"
            ) from exc
        self.url = url.rstrip("/")
        config = Configuration(host=self.url, access_token=token or os.environ.get(TOKEN_ENV))
        config.retries = 1
        self._client = ApiClient(config)
        self._api = TaskInstanceApi(self._client)
        self._timeout = timeout_s

    def close(self) -> None:
        self._client.rest_client.pool_manager.clear()

    def task_runs(self, dag_id: str, since: datetime, page_size: int = 100) -> Iterator[TaskRun]:
        """Every finished try of the DAG's tasks that started at or after `since`."""
        offset = 0
        while True:
            page = self._call(
                dag_id, self._api.get_task_instances, dag_id, "~", state=list(FINISHED),
                start_date_gte=since, limit=page_size, offset=offset,
                _request_timeout=self._timeout,
            )  # fmt: skip
            for ti in page.task_instances:
                state = getattr(ti.state, "value", ti.state)
                if state in FINISHED and ti.start_date and ti.end_date:
                    version = ti.dag_version.bundle_version if ti.dag_version else None
                    yield TaskRun(
                        dag_id, ti.task_id, ti.dag_run_id, ti.try_number, ti.map_index,
                        str(state), ti.start_date, ti.end_date, version,
                    )  # fmt: skip
            offset += len(page.task_instances)
            if not page.task_instances or offset >= (page.total_entries or 0):
                return

    def error_of(self, run: TaskRun) -> dict[str, Any] | None:
        """The exception a failed try raised (`exc_type`, `exc_value`, `frames`), from its log."""
        raw = self._call(
            run.dag_id, self._api.get_log_without_preload_content,
            run.dag_id, run.run_id, run.task_id, run.try_number, full_content=True,
            map_index=run.map_index, accept="application/json", _request_timeout=self._timeout,
        )  # fmt: skip
        if raw.status != 200:
            return None
        try:
            content = json.loads(raw.data).get("content")
        except (ValueError, AttributeError):
            return None
        # The model drops the fields it does not declare (`error_detail`): read the JSON.
        for entry in content if isinstance(content, list) else []:
            detail = entry.get("error_detail") if isinstance(entry, dict) else None
            if isinstance(detail, list) and detail and isinstance(detail[0], dict):
                return {**detail[0], "causes": detail[1:]}
        return None

    def dag_paused(self, dag_id: str) -> bool | None:
        """Whether the DAG is paused; None when the API server does not know it."""
        from airflow_client.client.api.dag_api import DAGApi
        from airflow_client.client.exceptions import NotFoundException

        get_dag = DAGApi(self._client).get_dag
        try:
            dag = self._call(dag_id, get_dag, dag_id, _request_timeout=self._timeout)
        except BadInputError as exc:
            if isinstance(exc.__cause__, NotFoundException):
                return None
            raise
        return bool(dag.is_paused)

    def _call(self, dag: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from airflow_client.client.exceptions import OpenApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except (OpenApiException, HTTPError, OSError, ValueError) as exc:
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            raise BadInputError(
                f"{self.url}: could not read DAG {dag} from the Airflow API "
                f"({first}); check [airflow] api_url and set {TOKEN_ENV} to a valid token"
            ) from exc


def record_airflow_runs(
    event: UniversalFailureEvent, memory: Memory, api: AirflowApi, base: str,
    incident_fingerprint: str, deploy_lag_s: float = 0.0,
) -> int:  # fmt: skip
    """Record the DAG's finished task runs not yet recorded; how many were new."""
    repo = event.repo_path or ""
    since = event.created_utc - LOOK_BACK
    seen = {(r.unit_id, r.run_utc) for r in memory.unit_runs(repo)}
    runs = []
    for run in api.task_runs(event.pipeline_id, since):
        unit = f"{run.dag_id}.{run.task_id}"
        ended = run.end.isoformat()
        if (unit, ended) in seen:
            continue
        commit = _commit_of(Path(repo), run, base, deploy_lag_s)
        if commit is None:
            continue
        passed = run.state == "success"
        print_ = "" if passed else _fingerprint(event, api.error_of(run), run, incident_fingerprint)
        runs.append(UnitRun(repo, unit, commit, passed, print_, ended))
        seen.add((unit, ended))
    runs.sort(key=lambda r: r.run_utc)
    memory.record_unit_runs(runs)
    return len(runs)


def _commit_of(repo: Path, run: TaskRun, base: str, lag_s: float) -> str | None:
    if run.bundle_version:
        out = run_git(
            repo, "rev-parse", "--verify", "--quiet", f"{run.bundle_version}^{{commit}}",
            check=False,
        )  # fmt: skip
        if out.strip():
            return out.strip()
    deployed = run.start - timedelta(seconds=lag_s)
    out = run_git(
        repo, "rev-list", "-1", "--first-parent", f"--before={deployed.isoformat()}",
        f"refs/heads/{base}", check=False,
    )  # fmt: skip
    return out.strip() or None


def _fingerprint(
    event: UniversalFailureEvent, error: dict[str, Any] | None, run: TaskRun, incident: str
) -> str:
    """The failed try in the attempt memory's terms (the incident's own when the same error)."""
    if error is None:
        kind, message, traceback = "TaskFailure", f"task {run.state} (no exception logged)", None
    else:
        kind, message = str(error.get("exc_type") or ""), str(error.get("exc_value") or "")
        traceback = _traceback(error)
    seen = event.model_copy(
        update={"error_type": kind, "error_message": message, "traceback": traceback}
    )
    if (kind, cause_message(seen)) == (event.error_type, cause_message(event)):
        return incident
    return error_fingerprint(seen)


def _traceback(error: dict[str, Any]) -> str:
    """The frames as Python prints them (all the fingerprint reads: file and function)."""
    lines = ["Traceback (most recent call last):"]
    for part in [*reversed(error.get("causes") or []), error]:
        for frame in part.get("frames") or []:
            if isinstance(frame, dict):
                lines.append(
                    f'  File "{frame.get("filename")}", line {frame.get("lineno") or 0}, '
                    f"in {frame.get('name')}"
                )
    lines.append(f"{error.get('exc_type')}: {error.get('exc_value')}")
    return "\n".join(lines)

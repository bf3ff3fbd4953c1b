"""Airflow runs for outcome tracking, read through `apache-airflow-client` from a local server
that answers with the shapes a real Airflow 3.3 API server returned (task instances, and a
structured task log with `error_detail`): commits, fingerprints, paging, de-duplication, and
what is said when no API is configured or it cannot be reached. The real server, scheduler and
DAG processor are in test_e2e_airflow.py."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from patchit.delivery.airflow_runs import AirflowApi, unit_key
from patchit.delivery.track import NO_API, track
from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory
from tests.conftest import git
from tests.delivery.test_track import UNIT, healed
from tests.fake_airflow import AirflowApiHandler, serving

# One task instance as Airflow 3.3.2's API server returned it (ids and times replaced per test).
TI: dict[str, Any] = {
    "id": "01a218ca-fbba-7b37-a891-878c1283ef32", "task_id": "total", "dag_id": "scripts",
    "dag_run_id": "manual__1", "map_index": -1, "logical_date": None,
    "run_after": "2026-11-26T16:58:05.590313Z", "start_date": "", "end_date": "",
    "duration": 8.872, "state": "success", "try_number": 1, "max_tries": 0,
    "task_display_name": "total", "dag_display_name": "scripts", "hostname": "vm",
    "unixname": "root", "pool": "default_pool", "pool_slots": 1, "queue": "default",
    "priority_weight": 1, "operator": "PythonOperator", "operator_name": "PythonOperator",
    "queued_when": "2026-11-26T16:58:06.399090Z", "scheduled_when": "2026-11-26T16:58:06.319592Z",
    "pid": 22875, "executor": None, "executor_config": "{}", "note": None,
    "rendered_map_index": None, "rendered_fields": {}, "trigger": None, "triggerer_job": None,
    "dag_version": {
        "id": "01a218ca-cf9a-76ee-9601-1abe3447b2f7", "version_number": 1, "dag_id": "scripts",
        "bundle_name": "dags-folder", "bundle_version": None,
        "created_at": "2026-11-26T16:57:54.330965Z", "dag_display_name": "scripts",
        "bundle_url": None,
    },
}  # fmt: skip


def task_instance(run_id: str, state: str, start: datetime, version: str | None) -> dict[str, Any]:
    ti = copy.deepcopy(TI)
    ti.update(dag_run_id=run_id, state=state, start_date=start.isoformat(),
              end_date=(start + timedelta(seconds=9)).isoformat())  # fmt: skip
    ti["dag_version"]["bundle_version"] = version
    return ti


def failure_log(exc_type: str, exc_value: str, repo: Path) -> dict[str, Any]:
    frame = {"filename": str(repo / "dags" / "totals.py"), "lineno": 7, "name": "total"}
    return {"content": [
        {"event": "::group::Pre Execute", "timestamp": "2026-11-26T16:58:20.605762Z"},
        {"timestamp": "2026-11-26T16:58:20.706610Z", "event": "Task failed with exception",
         "level": "error", "error_detail": [{"exc_type": exc_type, "exc_value": exc_value,
         "exc_notes": [], "syntax_error": None, "is_cause": False, "frames": [frame]}]},
    ], "continuation_token": None}  # fmt: skip


class FakeAirflow(AirflowApiHandler):
    tis: ClassVar[list[dict[str, Any]]] = []
    logs: ClassVar[dict[str, dict[str, Any]]] = {}
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        type(self).asked.append(url.path)
        query = parse_qs(url.query)
        if url.path == "/api/v2/dags/scripts/dagRuns/~/taskInstances":
            offset, limit = int(query["offset"][0]), int(query["limit"][0])
            since = datetime.fromisoformat(query["start_date_gte"][0].replace("Z", "+00:00"))
            mine = [t for t in self.tis if datetime.fromisoformat(t["start_date"]) >= since]
            self.answer_json(200, {"task_instances": mine[offset : offset + limit],
                                   "total_entries": len(mine)})  # fmt: skip
        elif "/logs/" in url.path and unquote(url.path.split("/")[6]) in self.logs:
            self.answer_json(200, self.logs[unquote(url.path.split("/")[6])])
        else:
            self.send_error(404)


@pytest.fixture
def api_url() -> Iterator[str]:
    FakeAirflow.tis, FakeAirflow.logs, FakeAirflow.asked = [], {}, []
    with serving(FakeAirflow) as url:
        yield url


def test_runs_read_from_the_api_judge_the_fix_fixed_then_regression(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, api_url: str
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    broken = git(repo, "rev-parse", "HEAD")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge the fix", incident.branch or "")
    merged = git(repo, "rev-parse", "HEAD")
    now = datetime.now(UTC)
    FakeAirflow.tis += [
        task_instance("r1", "failed", now - timedelta(hours=1), broken),  # the failure
        task_instance("r2", "success", now - timedelta(minutes=5), merged),
    ]
    FakeAirflow.logs["r1"] = failure_log(event.error_type, event.error_message, repo)

    [outcome] = track(memory, airflow_api=api_url)
    assert (outcome.outcome, outcome.seen_commit) == ("fixed", merged), outcome
    runs = memory.unit_runs(str(repo))
    assert [(r.unit_id, r.commit, r.passed) for r in runs] == [
        (UNIT, broken, False), (UNIT, merged, True)
    ]  # fmt: skip
    assert runs[0].fingerprint == incident.fingerprint  # the same error: the incident's own
    assert track(memory, airflow_api=api_url)[0].outcome == "fixed"
    assert len(memory.unit_runs(str(repo))) == 2  # read again, recorded once

    # no bundle version: the run is at the base branch's tip when it started
    FakeAirflow.tis.append(task_instance("r3", "failed", now + timedelta(hours=1), None))
    FakeAirflow.logs["r3"] = failure_log(event.error_type, event.error_message, repo)
    [outcome] = track(memory, airflow_api=api_url)
    assert (outcome.outcome, outcome.seen_commit) == ("regression", merged)
    assert memory.get_incident(incident.id).status == "open"


def test_another_error_is_fingerprinted_as_its_own(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path, api_url: str
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge the fix", incident.branch or "")
    merged = git(repo, "rev-parse", "HEAD")
    FakeAirflow.tis.append(task_instance("r1", "failed", datetime.now(UTC), merged))
    FakeAirflow.logs["r1"] = failure_log("ZeroDivisionError", "division by zero", repo)
    [outcome] = track(memory, airflow_api=api_url)
    assert outcome.outcome == "regression" and "fails since the fix" in outcome.detail
    [run] = memory.unit_runs(str(repo))
    assert run.fingerprint not in ("", incident.fingerprint)


def test_pages_are_followed(event: UniversalFailureEvent, api_url: str) -> None:
    start = datetime.now(UTC)
    FakeAirflow.tis += [task_instance(f"r{i}", "success", start, None) for i in range(5)]
    api = AirflowApi(api_url)
    try:
        runs = list(api.task_runs("scripts", start - timedelta(seconds=1), page_size=2))
    finally:
        api.close()
    assert [r.run_id for r in runs] == [f"r{i}" for i in range(5)]
    assert FakeAirflow.asked.count("/api/v2/dags/scripts/dagRuns/~/taskInstances") == 3
    assert unit_key(event) == "scripts.total"


def test_without_an_api_a_merged_airflow_fix_says_how_to_read_its_runs(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("PATCHIT_AIRFLOW_API_URL", raising=False)
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge the fix", incident.branch or "")
    [outcome] = track(memory)
    assert outcome.outcome == "pending" and outcome.detail.endswith(NO_API)


def test_an_unreachable_api_is_said_and_tracking_goes_on(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    incident = healed(event, memory, _patchit_home)
    git(repo, "merge", "-q", "--no-ff", "-m", "merge the fix", incident.branch or "")
    said: list[str] = []
    assert track(memory, said.append, airflow_api="http://127.0.0.1:9") == []
    [line] = said
    assert line.startswith(f"incident {incident.id}: cannot track (http://127.0.0.1:9: could not")
    assert "AIRFLOW_API_TOKEN" in line

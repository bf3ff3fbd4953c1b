"""`patchit airflow scan`: broken DAG files from real Airflow parsing and from the REST API."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.intake.airflow_scan import fetch_import_errors, split_error
from patchit.intake.spool import Spool
from tests.conftest import commit_all, git
from tests.fake_airflow import AirflowApiHandler, serving

GOOD_DAG = """
from datetime import datetime
from airflow.sdk import dag, task

@dag(schedule=None, start_date=datetime(2026, 1, 1))
def fine():
    @task
    def ok():
        return 1
    ok()

fine()
"""
BROKEN_DAG = "from airflow.sdk import dag\nimport helpers.shiping\n"
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/opt/airflow/dags/orders.py", line 3, in <module>\n'
    "    from helpers import shipping\n"
    "ImportError: cannot import name 'shiping' from 'helpers'\n"
)


def patchit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchit", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def spooled(home: Path) -> list[UniversalFailureEvent]:
    with Spool.open(home) as spool:
        return [UniversalFailureEvent.model_validate_json(r["payload"]) for r in spool.rows()]


@pytest.mark.slow
def test_scan_spools_one_event_per_broken_file(
    tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    repo = tmp_path / "pipelines"
    dags = repo / "dags"
    (dags / "helpers").mkdir(parents=True)
    (dags / "helpers" / "__init__.py").write_text("")
    (dags / "fine.py").write_text(GOOD_DAG)
    (dags / "orders.py").write_text(BROKEN_DAG)
    (dags / "syntax.py").write_text("from airflow.sdk import dag\ndef broken(:\n")
    git(repo, "init", "-q", "-b", "main")
    sha = commit_all(repo, "dags")
    proc = patchit("airflow", "scan", "--dags-folder", str(dags))
    assert proc.returncode == 0, proc.stderr
    assert "spooled 2 import error(s)" in proc.stdout
    events = {e.unit_id: e for e in spooled(_patchit_home)}
    assert set(events) == {"dags/orders.py", "dags/syntax.py"}
    orders = events["dags/orders.py"]
    assert (orders.source.value, orders.status) == ("airflow", "import_error")
    assert orders.error_type == "ModuleNotFoundError"
    assert "helpers.shiping" in orders.error_message
    assert orders.repo_path == str(repo) and orders.commit == sha
    assert orders.unit_path == "dags/orders.py" and orders.traceback
    assert events["dags/syntax.py"].error_type == "SyntaxError"


def test_scan_without_a_folder_is_bad_input(tmp_path: Path) -> None:
    proc = patchit("airflow", "scan", "--dags-folder", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert "DAG folder does not exist" in proc.stderr


class ImportErrorsApi(AirflowApiHandler):
    """Serves Airflow's documented `GET /api/v2/importErrors` shape, paginated."""

    items: list[dict[str, Any]] = [
        {
            "import_error_id": i + 1,
            "timestamp": "2026-11-25T10:00:00Z",
            "filename": name,
            "bundle_name": "dags-folder",
            "stack_trace": TRACE.replace("orders.py", name),
        }
        for i, name in enumerate(["orders.py", "sub/billing.py", "users.py"])
    ]
    auth: list[str] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path != "/api/v2/importErrors":
            self.send_error(404)
            return
        type(self).auth.append(self.headers.get("Authorization", ""))
        query = parse_qs(url.query)
        offset = int(query.get("offset", ["0"])[0])
        limit = int(query.get("limit", ["100"])[0])
        self.answer_json(
            200,
            {
                "import_errors": self.items[offset : offset + limit],
                "total_entries": len(self.items),
            },
        )


@pytest.fixture
def api_url() -> Iterator[str]:
    with serving(ImportErrorsApi) as url:
        yield url


def test_fetch_import_errors_pages_through_the_api(api_url: str) -> None:
    ImportErrorsApi.auth.clear()
    errors = fetch_import_errors(api_url, "tok3n", page_size=2)
    assert set(errors) == {"orders.py", "sub/billing.py", "users.py"}
    assert ImportErrorsApi.auth == ["Bearer tok3n", "Bearer tok3n"]


def test_scan_api_spools_events_under_the_dags_folder(
    api_url: str, tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "pipelines"
    (repo / "dags").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "dags" / "orders.py").write_text(BROKEN_DAG)
    commit_all(repo, "dags")
    proc = patchit("airflow", "scan", "--api", api_url, "--dags-folder", str(repo / "dags"))
    assert proc.returncode == 0, proc.stderr
    events = {e.unit_id: e for e in spooled(_patchit_home)}
    assert set(events) == {"dags/orders.py", "dags/sub/billing.py", "dags/users.py"}
    assert events["dags/orders.py"].error_type == "ImportError"
    assert events["dags/orders.py"].repo_path == str(repo)


def test_scan_api_unreachable_is_bad_input(tmp_path: Path) -> None:
    proc = patchit("airflow", "scan", "--api", "http://127.0.0.1:9", "--dags-folder", str(tmp_path))
    assert proc.returncode == 2
    assert "could not read import errors" in proc.stderr


def test_split_error() -> None:
    assert split_error(TRACE) == ("ImportError", "cannot import name 'shiping' from 'helpers'")
    assert split_error("boom") == ("ImportError", "boom")
    assert split_error("x\nairflow.exceptions.AirflowDagCycleException: Cycle detected")[0] == (
        "AirflowDagCycleException"
    )

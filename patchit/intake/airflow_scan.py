"""Broken DAGs: find the DAG files that fail to import and turn each into an event.

An import error never reaches a task callback, so it is found here: by parsing the DAG folder
the way the DAG processor does (Airflow's `BundleDagBag`, in a child process so the DAG files'
imports stay out of patchit's), or from a running Airflow's `GET /api/v2/importErrors`
through `apache-airflow-client`.

`python -m patchit.intake.airflow_scan DAGS_FOLDER` is that child: it prints
`{relative file: stack trace}` as JSON on its last stdout line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.intake.gitinfo import find_git_root, read_head, read_remote_url

SCAN_TIMEOUT_S = 300.0
API_TIMEOUT_S = 30.0
_MARKER = "PATCHIT-IMPORT-ERRORS:"
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt)?)"
                       r"(?::\s*(?P<msg>.*))?$")  # fmt: skip


def scan_env(dags_folder: Path, home: Path) -> dict[str, str]:
    """The child's environment: examples off, and no `~/airflow` created for a user who has none."""
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags_folder)
    if "AIRFLOW_HOME" not in env and not (Path.home() / "airflow").exists():
        env["AIRFLOW_HOME"] = str(home / "airflow-scan")
    return env


def collect_import_errors(dags_folder: Path, home: Path) -> dict[str, str]:
    """`{file relative to dags_folder: stack trace}` for every DAG file that fails to import."""
    folder = dags_folder.expanduser().resolve()
    if not folder.is_dir():
        raise BadInputError(f"{dags_folder}: DAG folder does not exist; pass --dags-folder DIR")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "patchit.intake.airflow_scan", str(folder)],
            capture_output=True,
            text=True,
            env=scan_env(folder, home),
            timeout=SCAN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(
            f"{folder}: parsing the DAG folder took over {SCAN_TIMEOUT_S:g} s; "
            "look for a DAG file doing work at import time"
        ) from exc
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARKER):
            data = json.loads(line[len(_MARKER) :])
            return {str(k): str(v) for k, v in data.items()}
    tail = (proc.stderr or proc.stdout).strip()[-1500:]
    raise HarnessError(
        f"{folder}: could not parse the DAG folder with Airflow (exit {proc.returncode}): {tail}; "
        "is apache-airflow installed (`pip install 'patchit[airflow]'`)?"
    )


def fetch_import_errors(api_url: str, token: str | None, page_size: int = 100) -> dict[str, str]:
    """Import errors of a running Airflow (`GET /api/v2/importErrors`), `{filename: trace}`."""
    try:
        from airflow_client.client import ApiClient, Configuration
        from airflow_client.client.api.import_error_api import ImportErrorApi
        from airflow_client.client.exceptions import OpenApiException
        from urllib3.exceptions import HTTPError
    except ImportError as exc:
        raise BadInputError(
            "--api needs apache-airflow-client; install it with `pip install 'patchit[airflow]'`"
        ) from exc
    config = Configuration(host=api_url.rstrip("/"), access_token=token)
    config.retries = 1
    found: dict[str, str] = {}
    try:
        with ApiClient(config) as client:
            api = ImportErrorApi(client)
            offset = 0
            while True:
                page = api.get_import_errors(
                    limit=page_size, offset=offset, _request_timeout=API_TIMEOUT_S
                )
                for item in page.import_errors:
                    found[item.filename] = item.stack_trace
                offset += len(page.import_errors)
                if not page.import_errors or offset >= page.total_entries:
                    return found
    except (OpenApiException, HTTPError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInputError(
            f"{api_url}: could not read import errors from the Airflow API ({first}); "
            "check the URL and set AIRFLOW_API_TOKEN to a valid token"
        ) from exc


def split_error(trace: str) -> tuple[str, str]:
    """(exception class, message) from the last line of a stack trace."""
    lines = [ln for ln in trace.strip().splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else ""
    match = _EXC_LINE.match(last)
    if match and (match.group("msg") is not None or "Error" in match.group("type")):
        return match.group("type").rsplit(".", 1)[-1], (match.group("msg") or last).strip()
    return "ImportError", last or "DAG file failed to import"


def import_error_events(
    errors: dict[str, str], dags_folder: Path, bundle_name: str | None = None
) -> list[UniversalFailureEvent]:
    """One `import_error` event per broken DAG file; unit_id is the file relative to its repo."""
    folder = dags_folder.expanduser().resolve()
    events: list[UniversalFailureEvent] = []
    for name, trace in sorted(errors.items()):
        path = Path(name) if Path(name).is_absolute() else folder / name
        root = find_git_root(path.parent) or find_git_root(folder)
        rel = path.as_posix()
        if root is not None:
            try:
                rel = path.resolve().relative_to(root).as_posix()
            except ValueError:
                rel = path.as_posix()
        error_type, message = split_error(trace)
        context: dict[str, Any] = {"dag_file": str(path), "dags_folder": str(folder)}
        if bundle_name:
            context["bundle_name"] = bundle_name
        events.append(
            UniversalFailureEvent(
                source=FailureSource.AIRFLOW,
                pipeline_id=path.stem,
                unit_id=rel,
                unit_path=rel if root is not None else None,
                status="import_error",
                error_type=error_type,
                error_message=message,
                traceback=trace,
                repo_path=str(root) if root else None,
                commit=read_head(root) if root else None,
                repo_url=read_remote_url(root) if root else None,
                context=context,
            )
        )
    return events


def _child(folder: str) -> int:
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(folder, bundle_path=Path(folder))
    print(_MARKER + json.dumps(dict(bag.import_errors)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))

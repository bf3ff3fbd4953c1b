"""`patchit worker`: claims, storms, recurrence, bad events, two workers, signals, dbt tasks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.worker.worker import NO_REPO, Worker
from tests.conftest import commit_all, git, run_dbt

OUTAGE = (
    'psycopg2.OperationalError: connection to server at "db.internal" (10.0.0.5), port 5432 '
    "failed: Connection refused\n\tIs the server running on that host?"
)


def airflow_event(
    dag: str, task: str, error_type: str, message: str, **extra: Any
) -> dict[str, Any]:
    event = UniversalFailureEvent(
        source=FailureSource.AIRFLOW,
        pipeline_id=dag,
        unit_id=task,
        run_id=f"scheduled__2026-11-25T0{len(task) % 10}:00:00+00:00",
        error_type=error_type,
        error_message=message,
        **extra,
    )
    return event.model_dump(mode="json")


def spool(home: Path, events: list[dict[str, Any]]) -> None:
    with Spool.open(home) as s:
        s.put_many(events)


def patchit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchit", *args], capture_output=True, text=True, timeout=600
    )


def test_storm_of_500_failures_is_one_incident(_patchit_home: Path) -> None:
    events = [
        airflow_event(f"dag_{d}", f"task_{t}", "OperationalError", OUTAGE)
        for d in range(50)
        for t in range(10)
    ]
    spool(_patchit_home, events)
    stats = Worker(_patchit_home).run(once=True)
    assert (stats.processed, stats.bad) == (500, 0)
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
    assert incident.events == 500 and incident.status == "open"
    assert incident.classification == "infra_issue"
    assert incident.summary == NO_REPO
    # the next schedule fails the same way: attached, still one incident
    spool(_patchit_home, [airflow_event("dag_0", "task_0", "OperationalError", OUTAGE)])
    Worker(_patchit_home).run(once=True)
    with Memory.open(_patchit_home) as memory:
        [again] = memory.list_incidents()
    assert again.id == incident.id and again.events == 501


def test_code_errors_are_grouped_per_cause_and_left_open(_patchit_home: Path) -> None:
    key_error = airflow_event("orders", "load", "KeyError", "'amout'", repo_path="/srv/repo")
    other = airflow_event("orders", "ship", "NameError", "name 'shiping' is not defined")
    missing_conn = airflow_event(
        "orders", "notify", "AirflowNotFoundException", "The conn_id `slack` isn't defined"
    )
    spool(_patchit_home, [key_error, other, missing_conn])
    Worker(_patchit_home).run(once=True)
    recurrence = airflow_event("orders", "load", "KeyError", "'amout'", repo_path="/srv/repo")
    spool(_patchit_home, [recurrence])
    Worker(_patchit_home).run(once=True)
    with Memory.open(_patchit_home) as memory:
        by_unit = {memory.events_for(i.id)[0].unit_id: i for i in memory.list_incidents()}
    assert set(by_unit) == {"load", "ship", "notify"}
    assert by_unit["load"].events == 2  # the next run attached to its incident
    assert all(i.status == "open" and i.summary == NO_REPO for i in by_unit.values())
    assert by_unit["notify"].classification == "env_mismatch"
    assert by_unit["load"].branch is None and by_unit["load"].attempts == 0


def test_bad_event_is_kept_and_once_exits_non_zero(_patchit_home: Path) -> None:
    good = airflow_event("orders", "load", "KeyError", "'amout'")
    with Spool.open(_patchit_home) as s:
        s.put({"source": "airflow", "unit_id": "x"})  # no pipeline_id
        s.put(good)
        s.conn.execute("insert into spool (created_utc, source, payload) values ('', '', '{nope')")
    proc = patchit("worker", "--once")
    assert proc.returncode == 1, proc.stderr
    assert "processed 1 event(s), 2 bad, 1 incident(s)" in proc.stdout
    with Spool.open(_patchit_home) as s:
        bad = s.rows("bad")
        assert s.counts() == {"bad": 2, "done": 1}
    assert "does not match the event schema at pipeline_id" in bad[0]["reason"]
    assert "not valid JSON" in bad[1]["reason"]
    assert patchit("worker", "--once").returncode == 0  # nothing left that could fail


def test_two_workers_never_take_the_same_event(_patchit_home: Path) -> None:
    events = [
        airflow_event(f"dag_{n % 7}", f"task_{n}", "OperationalError", OUTAGE) for n in range(300)
    ]
    spool(_patchit_home, events)
    cmd = [sys.executable, "-m", "patchit", "worker", "--once", "--batch-size", "7"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    processed = [int(re.search(r"processed (\d+)", out).group(1)) for out in outs]  # type: ignore[union-attr]
    assert sum(processed) == 300
    with Spool.open(_patchit_home) as s:
        rows = s.rows()
    assert {r["state"] for r in rows} == {"done"}
    assert {r["claims"] for r in rows} == {0}  # no death was counted against any of them
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
    assert incident.events == 300


def test_worker_stops_cleanly_on_sigterm(_patchit_home: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchit", "worker", "--poll-s", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (_patchit_home / "spool" / "spool.sqlite3").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    spool(_patchit_home, [airflow_event("orders", "load", "KeyError", "'amout'")])
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "processed 1 event(s), 0 bad" in out
    assert "stopping after the current batch" in err


@pytest.mark.slow
def test_airflow_task_that_ran_dbt_is_healed_as_one_dbt_incident(
    shop_repo: Path, _patchit_home: Path
) -> None:
    model = shop_repo / "models" / "marts" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("sum(amount) as revenue", "sum(amout) as revenue"))
    sha = commit_all(shop_repo, "daily_revenue: sum revenue per day")
    started = datetime.now(UTC) - timedelta(seconds=1)
    assert run_dbt(shop_repo, "build").returncode == 1  # the BashOperator's own dbt run
    command = f"cd {shop_repo} && dbt build --profiles-dir ."
    event = airflow_event(
        "shop_daily",
        "dbt_build",
        "AirflowException",
        "Bash command failed. The command returned a non-zero exit code 1.",
        repo_path=str(shop_repo),
        commit=sha,
        unit_path="dags/shop.py",
        context={
            "runs_dbt": True,
            "dbt_runner": "bash",
            "dbt_command": command,
            "dbt_args": ["build", "--profiles-dir", "."],
            "dbt_project_dir": str(shop_repo),
            "dbt_cwd": str(shop_repo),
            "task_started_utc": started.isoformat(),
            "bundle_name": "dags",
        },
    )
    spool(_patchit_home, [event])
    stats = Worker(_patchit_home).run(once=True)
    assert (stats.processed, stats.bad) == (1, 0)
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
        stored = memory.events_for(incident.id)
    assert incident.status == "fixed", incident.summary
    assert stored[0].source.value == "dbt" and stored[0].unit_id == "model.shop.daily_revenue"
    assert stored[0].context["airflow"]["task_id"] == "dbt_build"
    assert incident.repo_url == "bundle:dags"  # the task's bundle names the dbt node's repository
    assert git(shop_repo, "branch", "--list", incident.branch or "-")
    assert "sum(amount)" in git(
        shop_repo, "show", f"{incident.branch}:models/marts/daily_revenue.sql"
    )


def test_a_lone_surrogate_in_an_airflow_error_does_not_stall_the_worker(
    _patchit_home: Path,
) -> None:
    """Issue 12: `os.fsdecode(b"caf\\xe9")` in a message crashed `worker --once` in cause_key,
    left its batch `taken`, and the next run said "processed 0"."""
    from patchit.integrations.airflow import make_failure_callback

    callback = make_failure_callback(home=_patchit_home)
    message = os.fsdecode(b"No such file: '/data/caf\xe9.csv'")
    for task in ("load", "export"):
        try:
            raise FileNotFoundError(message)
        except FileNotFoundError as exc:
            callback({"task_instance": _TI(task), "exception": exc})
    res = patchit("worker", "--once")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "processed 2" in res.stdout + res.stderr
    with Spool.open(_patchit_home) as s:
        assert s.counts() == {"done": 2}
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
        [first, _] = memory.events_for(incident.id)
    assert "caf\\xe9.csv" in first.error_message


class _TI:
    dag_id = "files_daily"
    try_number = 1

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id


def test_an_airflow_event_whose_checkout_is_gone_is_left_open_with_the_mapping_hint(
    _patchit_home: Path, tmp_path: Path
) -> None:
    """The default SQLite state, an event named by remote URL whose clone is not on this host
    (nor mapped in [repos]): recorded open as without a repository, not a bad row."""
    url = "github.com/acme/dags"
    gone = airflow_event(
        "orders", "load", "KeyError", "'amout'", repo_path=str(tmp_path / "gone"), repo_url=url
    )
    spool(_patchit_home, [gone])
    res = patchit("worker", "--once")
    assert res.returncode == 0, res.stderr
    out = " ".join((res.stdout + res.stderr).split())  # lines wrapped to the terminal
    assert "left open: no repository known" in out and '[repos] "github.com/acme/dags"' in out
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
    assert incident.status == "open" and incident.summary == NO_REPO
    with Spool.open(_patchit_home) as s:
        assert s.counts() == {"done": 1}
    # a [repos] mapping that is wrong is still an error
    (_patchit_home / "patchit.toml").write_text(f'[repos]\n"github.com/acme/dags" = "{tmp_path}"\n')
    spool(_patchit_home, [gone | {"event_id": "another"}])
    res = patchit("worker", "--once")
    assert res.returncode == 1 and "fix the mapping" in res.stdout + res.stderr

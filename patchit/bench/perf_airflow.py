"""`patchit bench --airflow`: what the Airflow side costs, against the obvious baselines.

    callback      `on_failure_callback` per call, in a fresh process that has already
                  imported `airflow.sdk` (perf_callback), against the 50 ms target
    storm         10,000 refused-connection failures from many dags and tasks spooled, then
                  `Worker(home).run(once=True)`: the wall time and the one incident they make
    harness       verifying one candidate fix of a small failing DAG (perf_airflow_harness),
                  interleaved K times: `airflow db migrate` + `airflow tasks test` in a fresh
                  AIRFLOW_HOME, AirflowHarness(warm=True).verify, AirflowHarness(warm=False).verify

Everything runs in one temp dir (repos, PATCHIT_HOME, AIRFLOW_HOMEs), removed afterwards.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from patchit.bench.perf import _patchit_home
from patchit.bench.perf_airflow_harness import (
    MEASURES,
    HarnessBench,
    HarnessTimings,
    make_dag_repo,
    measure_harness,
)
from patchit.errors import PatchitError
from patchit.harnesses.airflow.home import airflow_version
from patchit.intake.spool import Spool
from patchit.integrations.airflow import build_event
from patchit.memory import Memory
from patchit.sandbox.git import run_git
from patchit.worker.worker import Worker

CALLBACK_TARGET_MS = 50.0
WARM_TARGET_S = 0.5  # one warm verification by the Airflow harness
LABELS = {"cli_test": "CLI baseline", "warm_verify": "warm verify", "fresh_verify": "fresh verify"}
STORM_MESSAGE = (
    'connection to server at "warehouse.internal" (10.20.0.5), port 5432 failed: '
    "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?"
)
STORM_TASKS_PER_DAG = 50


class OperationalError(Exception):
    """The error a Postgres client raises when the warehouse is down (named as psycopg's)."""


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the smallest sample with `fraction` of samples at or below."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass
class AirflowPerfResult:
    """Measured callback, storm and harness costs, plus the setting."""

    airflow_version: str
    calls: int
    storm_events: int
    runs: int
    callback_samples_ms: list[float] = field(default_factory=list)
    callback_import_ms: float = 0.0
    sdk_import_ms: float = 0.0
    callback_new_modules: list[str] = field(default_factory=list)
    storm_spool_s: float = 0.0
    storm_worker_s: float = 0.0
    storm_incident: dict[str, Any] = field(default_factory=dict)
    harness: HarnessTimings | None = None

    def callback_median_ms(self) -> float:
        return statistics.median(self.callback_samples_ms)

    def callback_p95_ms(self) -> float:
        return percentile(self.callback_samples_ms, 0.95)

    def storm_events_per_s(self) -> float:
        return self.storm_events / self.storm_worker_s

    def timings(self) -> HarnessTimings:
        if self.harness is None:
            raise ValueError("the harness part has not been measured")
        return self.harness

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = asdict(self)
        data["callback_median_ms"] = round(self.callback_median_ms(), 3)
        data["callback_p95_ms"] = round(self.callback_p95_ms(), 3)
        data["callback_ratio_to_target"] = round(self.callback_median_ms() / CALLBACK_TARGET_MS, 4)
        data["storm_events_per_s"] = round(self.storm_events_per_s(), 1)
        harness = self.timings()
        data["median_s"] = {m: round(harness.median_s(m), 3) for m in MEASURES}
        data["ratio_to_cli"] = {m: round(harness.ratio(m), 4) for m in MEASURES}
        data["speedup"] = {m: round(1 / harness.ratio(m), 2) for m in MEASURES}
        return data


def format_report(result: AirflowPerfResult) -> str:
    """The lines `patchit bench --airflow` prints."""
    median, p95 = result.callback_median_ms(), result.callback_p95_ms()
    incident = result.storm_incident
    lines = [
        f"patchit bench --airflow: Airflow {result.airflow_version}; {result.calls} callback "
        f"calls, {result.storm_events} storm events, medians of {result.runs} run(s)",
        f"{'callback:'.ljust(18)}median {median:.2f} ms, p95 {p95:.2f} ms per call "
        f"= {median / CALLBACK_TARGET_MS:.2f}x the {CALLBACK_TARGET_MS:g} ms target "
        f"(p95 {p95 / CALLBACK_TARGET_MS:.2f}x)",
        f"{'callback import:'.ljust(18)}{result.callback_import_ms:.1f} ms "
        f"({len(result.callback_new_modules)} modules, after airflow.sdk's "
        f"{result.sdk_import_ms:.0f} ms)",
        f"{'storm:'.ljust(18)}{result.storm_events} events -> 1 incident in "
        f"{result.storm_worker_s:.2f} s ({result.storm_events_per_s():.0f} events/s; "
        f"building and spooling them took {result.storm_spool_s:.2f} s)",
        f"{'storm incident:'.ljust(18)}{incident['id']} {incident['status']} "
        f"{incident['classification']}, {incident['events']} events",
    ]
    harness = result.timings()
    migrate = statistics.median(harness.cli_migrate_s)
    task_test = statistics.median(harness.cli_task_test_s)
    for measure in MEASURES:
        label = f"{LABELS[measure]}:".ljust(18)
        seconds = harness.median_s(measure)
        if measure == "cli_test":
            lines.append(
                f"{label}{seconds:7.2f} s (baseline; medians of its parts: db migrate "
                f"{migrate:.2f} s, tasks test {task_test:.2f} s)"
            )
            continue
        ratio = harness.ratio(measure)
        pace = f"{1 / ratio:.1f}x faster" if ratio <= 1 else f"{ratio:.1f}x slower"
        line = f"{label}{seconds:7.2f} s = {ratio:.2f}x CLI ({pace})"
        if measure == "warm_verify":
            met = "met" if seconds <= WARM_TARGET_S else "NOT met"
            line += f"; target <= {WARM_TARGET_S:g} s: {met}"
        lines.append(line)
    lines.append(
        f"{'parent start:'.ljust(18)}{harness.parent_start_s:7.2f} s (one-off, not in warm verify)"
    )
    lines.append(
        f"{'template migrate:'.ljust(18)}{harness.template_migrate_s:7.2f} s "
        "(one-off per Airflow version, in neither verify)"
    )
    return "\n".join(lines)


def dump_json(result: AirflowPerfResult) -> str:
    return json.dumps(result.to_json(), indent=2)


def measure_callback(work: Path, calls: int, result: AirflowPerfResult) -> None:
    """`calls` callback calls in a fresh child process; every one must have spooled."""
    repo = make_dag_repo(work / "callback-repo")
    home = work / "callback-home"
    env = {**os.environ, "PATCHIT_HOME": str(home)}
    env.pop("PATCHIT_CALLBACK_DISABLED", None)
    dags = repo / "dags"
    proc = subprocess.run(
        [sys.executable, "-m", "patchit.bench.perf_callback", str(calls),
         str(dags / "bench_orders.py"), str(dags)],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0:
        raise PatchitError(f"the callback benchmark process failed:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    with Spool.open(home) as spool:
        spooled = spool.counts().get("pending", 0)
    if spooled != calls or len(data["samples_ms"]) != calls:
        raise PatchitError(f"{calls} callback calls spooled {spooled} events:\n{proc.stderr}")
    result.callback_samples_ms = data["samples_ms"]
    result.callback_import_ms = data["import_ms"]
    result.sdk_import_ms = data["sdk_import_ms"]
    result.callback_new_modules = data["new_modules"]


def storm_events(repo: Path, count: int) -> list[dict[str, Any]]:
    """`count` callback events of tasks across many DAGs failing on one refused connection."""
    events = []
    started = datetime.now(UTC)
    for i in range(count):
        dag_id = f"warehouse_load_{i // STORM_TASKS_PER_DAG:03d}"
        ti = SimpleNamespace(
            dag_id=dag_id, task_id=f"load_table_{i % STORM_TASKS_PER_DAG:02d}",
            run_id="scheduled__2026-11-25T00:00:00+00:00", try_number=1, map_index=-1,
            start_date=started, hostname=f"worker-{i % 8}", max_tries=0,
        )  # fmt: skip
        dag = SimpleNamespace(dag_id=dag_id, fileloc=str(repo / "dags" / "bench_orders.py"))
        context = {"ti": ti, "dag": dag, "exception": OperationalError(STORM_MESSAGE)}
        events.append(build_event(context))
    return events


def measure_storm(work: Path, count: int, result: AirflowPerfResult) -> None:
    """Spool the storm, run one worker pass, and check it made exactly one incident."""
    repo = make_dag_repo(work / "storm-repo")
    # a clone with a remote, as deployed: every event names it by URL too (`repo_url`)
    run_git(repo, "remote", "add", "origin", "https://github.com/acme/warehouse-dags.git")
    home = work / "storm-home"
    started = time.monotonic()
    events = storm_events(repo, count)
    with Spool.open(home) as spool:
        spool.put_many(events)
    result.storm_spool_s = round(time.monotonic() - started, 3)
    started = time.monotonic()
    stats = Worker(home).run(once=True)
    result.storm_worker_s = round(time.monotonic() - started, 3)
    with Memory.open(home) as memory:
        incidents = memory.list_incidents()
    if stats.processed != count or stats.bad or len(incidents) != 1:
        found = [(i.id, i.status, i.events) for i in incidents]
        raise PatchitError(
            f"the storm of {count} events made {found} (processed {stats.processed}, "
            f"bad {stats.bad}); expected one incident"
        )
    [incident] = incidents
    if incident.events != count:
        raise PatchitError(f"the storm incident holds {incident.events} of {count} events")
    result.storm_incident = {
        "id": incident.id, "status": str(incident.status),
        "classification": incident.classification, "events": incident.events,
    }  # fmt: skip


def run_airflow_perf(
    calls: int = 200,
    storm: int = 10_000,
    runs: int = 3,
    workdir: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> AirflowPerfResult:
    """Measure as the module docstring says; the temp dir is removed after unless `workdir`
    is given."""
    if min(calls, storm, runs) < 1:
        raise ValueError("calls, storm and runs must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="patchit-bench-airflow-")) if workdir is None else workdir
    work.mkdir(parents=True, exist_ok=True)
    work = work.resolve()
    result = AirflowPerfResult(
        airflow_version=airflow_version(), calls=calls, storm_events=storm, runs=runs
    )
    try:
        with _patchit_home(work / "home"):
            say(f"timing {calls} callback calls in a process that imported airflow.sdk")
            measure_callback(work, calls, result)
            say(f"spooling a storm of {storm} refused-connection failures; one worker pass")
            measure_storm(work, storm, result)
            say(f"setting up the failing DAG for {runs} interleaved harness run(s)")
            result.harness = measure_harness(HarnessBench(work / "harness", say), runs, say)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return result

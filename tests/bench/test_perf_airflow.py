"""`patchit bench --airflow` end to end with small numbers (real Airflow, git, SQLite)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchit.bench.perf_airflow import AirflowPerfResult, format_report, percentile
from patchit.bench.perf_airflow_harness import MEASURES, HarnessTimings


def patchit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchit", *args], capture_output=True, text=True, timeout=1200
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-airflow") / "work"


@pytest.fixture(scope="module")
def measured(workdir: Path) -> dict[str, Any]:
    res = patchit("bench", "--airflow", "--calls", "20", "--storm", "200", "--runs", "1",
                  "--json", "--workdir", str(workdir))  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def result_of(data: dict[str, Any]) -> AirflowPerfResult:
    fields = {k: v for k, v in data.items() if k in AirflowPerfResult.__dataclass_fields__}
    fields["harness"] = HarnessTimings(**data["harness"])
    return AirflowPerfResult(**fields)


@pytest.mark.slow
def test_callback_numbers_are_the_measured_calls(measured: dict[str, Any]) -> None:
    samples = measured["callback_samples_ms"]
    assert measured["calls"] == 20 and len(samples) == 20 and all(s > 0 for s in samples)
    assert measured["callback_median_ms"] == pytest.approx(statistics.median(samples), abs=1e-3)
    assert measured["callback_p95_ms"] == pytest.approx(sorted(samples)[18], abs=1e-3)
    assert measured["callback_ratio_to_target"] == pytest.approx(
        statistics.median(samples) / 50, rel=1e-3
    )
    # imported after airflow.sdk: only the callback's own stdlib-only modules were new
    assert measured["sdk_import_ms"] > measured["callback_import_ms"] > 0
    assert "patchit.integrations.airflow" in measured["callback_new_modules"]
    assert not any(m.startswith("pydantic") for m in measured["callback_new_modules"])


@pytest.mark.slow
def test_storm_made_one_incident_holding_every_event(
    measured: dict[str, Any], workdir: Path
) -> None:
    incident = measured["storm_incident"]
    assert measured["storm_events"] == 200 and incident["events"] == 200
    assert (incident["status"], incident["classification"]) == ("escalated", "infra_issue")
    assert measured["storm_worker_s"] > 0
    assert measured["storm_events_per_s"] == pytest.approx(
        200 / measured["storm_worker_s"], rel=1e-2
    )
    # the kept workdir holds the worker's memory with that one incident
    listed = patchit("--home", str(workdir / "storm-home"), "incidents", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [i["id"] for i in json.loads(listed.stdout)] == [incident["id"]]


@pytest.mark.slow
def test_harness_samples_and_ratios_come_from_the_runs(measured: dict[str, Any]) -> None:
    harness = measured["harness"]
    assert harness["runs"] == 1
    [migrate], [task_test] = harness["cli_migrate_s"], harness["cli_task_test_s"]
    assert harness["samples_s"]["cli_test"] == [pytest.approx(migrate + task_test, abs=2e-3)]
    assert harness["cli_task_succeeded"] == [True]  # the CLI ran the fixed task, and it passed
    cli = harness["samples_s"]["cli_test"][0]
    for measure in MEASURES:
        [seconds] = harness["samples_s"][measure]
        assert seconds > 0
        assert measured["median_s"][measure] == pytest.approx(seconds, abs=1e-3)
        # printed to 4 places: a small ratio is only that exact
        ratio = measured["ratio_to_cli"][measure]
        assert ratio == pytest.approx(seconds / cli, rel=1e-3, abs=5e-5)
    assert harness["parent_start_s"] > 0 and harness["template_migrate_s"] > 0
    # the template was migrated up front: the timed warm verify did not pay for it
    assert harness["warm_timings_ms"][0]["migrate_ms"] == 0


@pytest.mark.slow
def test_report_prints_the_measured_numbers(measured: dict[str, Any]) -> None:
    result = result_of(measured)
    lines = format_report(result).splitlines()
    assert lines[0].startswith("patchit bench --airflow: Airflow 3.")
    callback = re.fullmatch(
        r"callback: +median (\d+\.\d\d) ms, p95 (\d+\.\d\d) ms per call = (\d+\.\d\d)x the 50 ms "
        r"target \(p95 \d+\.\d\dx\)",
        lines[1],
    )
    assert callback, lines[1]
    assert float(callback.group(1)) == pytest.approx(result.callback_median_ms(), abs=0.01)
    assert re.fullmatch(r"storm: +200 events -> 1 incident in \d+\.\d\d s \(\d+ events/s; .*\)",
                        lines[3]), lines[3]  # fmt: skip
    assert re.fullmatch(
        r"CLI baseline: +\d+\.\d\d s \(baseline; medians of its parts: db migrate .*\)", lines[5]
    )
    warm = next(line for line in lines if line.startswith("warm verify:"))
    match = re.fullmatch(
        r"warm verify: +(\d+\.\d\d) s = (\d+\.\d\d)x CLI \((\d+\.\d)x (faster|slower)\); "
        r"target <= 0\.5 s: (met|NOT met)",
        warm,
    )
    assert match, warm
    assert float(match.group(2)) == pytest.approx(result.timings().ratio("warm_verify"), abs=0.01)
    assert (match.group(5) == "met") == (result.timings().median_s("warm_verify") <= 0.5)
    assert lines[-2].startswith("parent start:") and lines[-1].startswith("template migrate:")


def test_percentile_is_nearest_rank() -> None:
    samples = [float(n) for n in range(1, 21)]
    assert percentile(samples, 0.95) == 19.0
    assert percentile(samples[::-1], 0.5) == 10.0
    assert percentile([3.0], 0.95) == 3.0


def test_help_documents_both_parts() -> None:
    res = patchit("bench", "--help")
    assert res.returncode == 0
    assert "--perf" in res.stdout and "--airflow" in res.stdout and "--storm" in res.stdout

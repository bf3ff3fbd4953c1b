"""What a storm costs per event: a worker taking 10,000 spooled failures of one outage in
batches must not pay per event what it can pay per batch (the alert storm slowed from 3.9 s to
9.1 s for 10,000 events). Real git, real SQLite, the real worker; the calls are counted on the
real functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import patchit.events.model
import patchit.intake.checkouts
import patchit.loop
import patchit.memory.fingerprint
import patchit.reports.refresh
import patchit.worker
from patchit.bench.perf_airflow import AirflowPerfResult, measure_storm


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_a_storm_pays_per_batch_not_per_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = counted(monkeypatch, patchit.events.model, "environment_secrets")
    reports = counted(monkeypatch, patchit.loop, "refresh_report")
    # one outage's message normalised once, not three times per event (cause, storm, fingerprint)
    patchit.memory.fingerprint._normalised.cache_clear()
    normalised = counted(monkeypatch, patchit.memory.fingerprint, "_normalise")
    deployments = counted(monkeypatch, patchit.intake.checkouts, "load_deployment")
    commits = counted(monkeypatch, patchit.worker, "run_git")  # is the commit there?
    result = AirflowPerfResult(airflow_version="", calls=0, storm_events=400, runs=1)
    measure_storm(tmp_path, 400, result)  # one incident holding the 400 events, or it raises
    batches = 400 // 50
    assert result.storm_incident["events"] == 400
    assert len(secrets) <= 2 * batches, len(secrets)  # the environment read once per batch
    assert len(reports) <= batches + 1, len(reports)  # one render per batch's recurrence
    assert len(normalised) <= batches, len(normalised)
    assert deployments == [], len(deployments)  # events named by their path: nothing to map
    assert len(commits) <= 1, len(commits)  # asked once, not per batch

"""The wrapper hears of dbt's first errored node while dbt still runs, and starts the heal's
dbt worker then; the dbt harness adopts that worker, or stops it when its sandbox differs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.harnesses.dbt import prewarm as dbt_prewarm
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.intake.dbt_run import run_dbt

pytestmark = pytest.mark.slow  # real dbt runs and dbt workers


def _project(root: Path, broken: bool) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: p\nprofile: p\nconfig-version: 2\n")
    (root / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        "      path: p.duckdb\n      threads: 2\n"
    )
    column = "nope" if broken else "id"
    (root / "models" / "fast.sql").write_text(f"select {column} from (select 1 as id)\n")
    # independent of `fast`: with two threads it runs beside it and ends seconds later
    (root / "models" / "slow.py").write_text(
        "import time\n\ndef model(dbt, session):\n    time.sleep(4)\n"
        "    return session.sql('select 1 as id')\n"
    )
    return root


def _run(project: Path, work: Path) -> tuple[int, list[float], float]:
    called: list[float] = []
    code, _ = run_dbt(
        ["build", "--project-dir", str(project), "--profiles-dir", str(project)],
        work, on_error=lambda: called.append(time.monotonic()),
    )  # fmt: skip
    return code, called, time.monotonic()


def test_on_error_is_called_once_at_the_first_error_while_dbt_goes_on(tmp_path: Path) -> None:
    code, called, ended = _run(_project(tmp_path / "broken", broken=True), tmp_path / "runs")
    assert code == 1
    assert len(called) == 1
    assert ended - called[0] > 2.0  # told at `fast`'s error, not after `slow`'s 4 s


def test_a_green_run_never_calls_on_error(tmp_path: Path) -> None:
    code, called, _ = _run(_project(tmp_path / "green", broken=False), tmp_path / "runs")
    assert code == 0
    assert called == []


def test_the_harness_adopts_a_prewarmed_worker_with_its_sandbox_settings() -> None:
    pid = dbt_prewarm.prewarm(SandboxConfig())
    with DbtHarness(warm=True) as harness:
        harness.start()
        assert harness.worker_pid == pid  # the same process: no second import of dbt
    with pytest.raises(ProcessLookupError):  # the harness's close() stopped it
        os.kill(pid, 0)


def test_a_prewarmed_worker_with_other_sandbox_settings_is_stopped_not_used() -> None:
    pid = dbt_prewarm.prewarm(SandboxConfig(network=True))
    with DbtHarness(warm=True) as harness:  # the harness's sandbox has no network
        harness.start()
        assert harness.worker_pid not in (None, pid)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    dbt_prewarm.discard()

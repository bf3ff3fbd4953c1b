"""A `patchit dbt -- build` wrapper killed once dbt has exited loses no failure: the failed
nodes are spooled before anything else, taken by the wrapper, and a worker takes them once the
wrapper is dead. Real dbt, real git, real SQLite; the kills are real SIGKILLs (at the
`spooled` checkpoint of `patchit.loop.faults`, and by a timer after dbt's summary line)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from patchit.intake.spool import Spool
from patchit.loop.faults import FAULT_ENV
from patchit.memory import Memory
from tests.cli.helpers import incidents, patchit
from tests.conftest import git

MODEL = "models/marts/daily_revenue.sql"
UNIT = "model.shop.daily_revenue"


def break_and_commit(repo: Path) -> None:
    model = repo / MODEL
    model.write_text(model.read_text().replace("sum(amount) as revenue", "sum(amout) as revenue"))
    git(repo, "commit", "-qam", "daily_revenue: a typo")


def wrapper(repo: Path, home: Path, fault_at: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PATCHIT_HOME": str(home)}
    env.pop(FAULT_ENV, None)
    if fault_at:
        env[FAULT_ENV] = fault_at
    return subprocess.Popen(
        [sys.executable, "-m", "patchit", "dbt", "--project-dir", str(repo), "--",
         "build", "--profiles-dir", str(repo)],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def spooled_units(home: Path) -> list[tuple[str, str]]:
    with Spool.open(home) as spool:
        return [(row["state"], json.loads(row["payload"])["unit_id"]) for row in spool.rows()]


def incident_units(home: Path) -> list[str]:
    with Memory.open(home) as memory:
        return [str(r["unit_id"]) for r in memory.db.query("select unit_id from events")]


def test_a_wrapper_killed_after_dbt_leaves_its_failure_to_the_worker(
    shop_repo: Path, _patchit_home: Path
) -> None:
    break_and_commit(shop_repo)
    proc = wrapper(shop_repo, _patchit_home, fault_at="spooled")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, out[-3000:]
    assert "ERROR=1" in out  # dbt finished and printed its summary before the kill
    # nothing but the spool row was written: the failure is there, taken by the dead wrapper
    assert spooled_units(_patchit_home) == [("taken", UNIT)]
    assert incident_units(_patchit_home) == []

    res = patchit("worker", "--once")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert spooled_units(_patchit_home) == [("done", UNIT)]
    (incident,) = incidents()
    assert incident["status"] == "fixed", incident
    assert "sum(amount)" in git(shop_repo, "show", f"{incident['branch']}:{MODEL}")


def test_a_wrapper_that_heals_marks_its_spooled_failure_done(
    shop_repo: Path, _patchit_home: Path
) -> None:
    """Not killed, the wrapper heals the failure itself; the worker finds nothing to do."""
    break_and_commit(shop_repo)
    proc = wrapper(shop_repo, _patchit_home)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out[-3000:]
    assert spooled_units(_patchit_home) == [("done", UNIT)]
    (incident,) = incidents()
    assert incident["status"] == "fixed", incident

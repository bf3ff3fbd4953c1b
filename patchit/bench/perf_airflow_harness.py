"""The harness part of `patchit bench --airflow`: verifying one candidate fix of a failing
DAG, against checking the same fix with Airflow's CLI.

A temp git repo holds `dags/bench_orders.py`, whose one task fails with a KeyError on a
settings key typo. Then, interleaved, K times each:

    cli_test      a fresh AIRFLOW_HOME, `airflow db migrate`, `airflow tasks test` of the
                  task on the fix (what a user checking a fix by hand runs; `tasks test`
                  exits 0 even when the task fails, so only its time is used, and whether the
                  log says the task succeeded is recorded)
    warm_verify   AirflowHarness(warm=True).verify of the fix in a worktree
    fresh_verify  AirflowHarness(warm=False).verify of the same

Each run's copy of the fix carries a distinct trailing comment, as a new candidate would.
One-off costs are timed on their own and left out of the verifies: the warm parent's start,
and the template metadata DB's `airflow db migrate` (once per Airflow version and home).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from patchit.config import resolve_home
from patchit.errors import HarnessError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.airflow.home import airflow_env, ensure_template_db
from patchit.harnesses.base import Workspace
from patchit.sandbox.git import run_git
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home

MEASURES = ("cli_test", "warm_verify", "fresh_verify")
DAG_ID, TASK_ID, DAG_PATH = "bench_orders", "summarise", "dags/bench_orders.py"
LOGICAL_DATE = datetime(2024, 1, 1, tzinfo=UTC)
GOOD_KEY, TYPO_KEY = "SETTINGS['currency']", "SETTINGS['curency']"
CLI_SUCCESS_MARK = "new_state=success"
_GIT_ID = ("-c", "user.name=patchit bench", "-c", "user.email=bench@localhost")

DAG_SOURCE = '''"""A small daily DAG: summarise the orders in the configured currency."""

from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

SETTINGS = {"currency": "EUR", "columns": ["region", "orders"]}


def summarise(**context):
    rows = [{"region": "north", "orders": 12}, {"region": "south", "orders": 7}]
    total = sum(row["orders"] for row in rows)
    return f"{total} orders in {SETTINGS['currency']}"


with DAG(dag_id="bench_orders", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="summarise", python_callable=summarise)
'''


def _commit(repo: Path, message: str) -> None:
    run_git(repo, "add", "-A")
    run_git(repo, *_GIT_ID, "commit", "-q", "-m", message)


def make_dag_repo(repo: Path) -> Path:
    """A git repo whose one commit holds the good DAG at DAG_PATH."""
    (repo / "dags").mkdir(parents=True)
    (repo / DAG_PATH).write_text(DAG_SOURCE, encoding="utf-8")
    (repo / ".gitignore").write_text("__pycache__/\n")
    run_git(repo, "init", "-q", "-b", "main")
    _commit(repo, "bench: orders DAG")
    return repo


@dataclass
class HarnessTimings:
    """Measured seconds per run (in run order) for each of MEASURES, and the one-off costs."""

    runs: int
    samples_s: dict[str, list[float]] = field(default_factory=dict)
    cli_migrate_s: list[float] = field(default_factory=list)
    cli_task_test_s: list[float] = field(default_factory=list)
    cli_task_succeeded: list[bool] = field(default_factory=list)
    warm_timings_ms: list[dict[str, int]] = field(default_factory=list)
    parent_start_s: float = 0.0
    template_migrate_s: float = 0.0

    def median_s(self, measure: str) -> float:
        return statistics.median(self.samples_s[measure])

    def ratio(self, measure: str) -> float:
        """This measure's median over the CLI baseline's: 0.05 is 20x faster."""
        return self.median_s(measure) / self.median_s("cli_test")


class HarnessBench:
    """The temp repo with the failing DAG, its event, the fix; one method per measure."""

    def __init__(self, work: Path, say: Callable[[str], None]) -> None:
        self.work, self.say = work, say
        self.repo = make_dag_repo(work / "repo")
        dag = self.repo / DAG_PATH
        self.good = dag.read_text(encoding="utf-8")
        dag.write_text(self.good.replace(GOOD_KEY, TYPO_KEY), encoding="utf-8")
        _commit(self.repo, "orders: typo in the settings key")
        self.event = UniversalFailureEvent(
            source=FailureSource.AIRFLOW, pipeline_id=DAG_ID, unit_id=TASK_ID,
            unit_path=DAG_PATH, logical_date=LOGICAL_DATE, try_number=1,
            error_type="KeyError", error_message="'curency'",
            repo_path=str(self.repo), commit=run_git(self.repo, "rev-parse", "HEAD").strip(),
            context={"dags_folder": str(self.repo / "dags")},
        )  # fmt: skip
        self.baseline = create_worktree(self.repo, "HEAD", work / "baseline")
        self.count = 0

    def _write_fix(self, root: Path) -> None:
        self.count += 1
        text = f"{self.good}# patchit bench candidate {self.count}\n"
        (root / DAG_PATH).write_text(text, encoding="utf-8")

    def cli_test(self) -> tuple[float, float, bool]:
        """(db migrate s, tasks test s, whether the log says the task succeeded)."""
        self._write_fix(self.baseline)
        home = self.work / "cli" / f"run{self.count}"
        for sub in ("logs", "plugins", "home"):
            (home / sub).mkdir(parents=True)
        env = airflow_env(home, home / "airflow.db", self.baseline / "dags", home / "home")
        airflow = Path(sys.executable).parent / "airflow"
        executable = str(airflow) if airflow.is_file() else (shutil.which("airflow") or "airflow")
        timed: list[float] = []
        output = ""
        date = LOGICAL_DATE.date().isoformat()
        for args in (["db", "migrate"], ["tasks", "test", DAG_ID, TASK_ID, date]):
            started = time.monotonic()
            proc = subprocess.run(
                [executable, *args], cwd=self.baseline, env=env, capture_output=True, text=True,
                stdin=subprocess.DEVNULL, timeout=900,
            )  # fmt: skip
            timed.append(time.monotonic() - started)
            output = proc.stdout + proc.stderr
            if proc.returncode != 0:
                raise HarnessError(f"`airflow {' '.join(args)}` failed:\n{output[-3000:]}")
        shutil.rmtree(home, ignore_errors=True)
        return timed[0], timed[1], CLI_SUCCESS_MARK in output

    def verify(self, harness: AirflowHarness) -> float:
        number = self.count + 1
        # under $PATCHIT_HOME, where the loop puts them: inside the warm sandbox's areas
        root = create_worktree(self.repo, "HEAD", worktrees_home() / f"bench-c{number}")
        scratch = resolve_home() / "sandboxes" / f"bench-c{number}"
        try:
            self._write_fix(root)
            started = time.monotonic()
            result = harness.verify(Workspace(root=root, scratch=scratch), self.event)
            seconds = time.monotonic() - started
        finally:
            remove_worktree(self.repo, root)
            shutil.rmtree(scratch, ignore_errors=True)
        if not result.passed:
            raise HarnessError(f"the right fix did not verify:\n{result.output[-3000:]}")
        return seconds


def measure_harness(bench: HarnessBench, runs: int, say: Callable[[str], None]) -> HarnessTimings:
    timings = HarnessTimings(runs=runs, samples_s={m: [] for m in MEASURES})
    say("migrating the template metadata DB (one-off)")
    started = time.monotonic()
    ensure_template_db()
    timings.template_migrate_s = round(time.monotonic() - started, 3)
    with AirflowHarness(warm=True) as warm, AirflowHarness(warm=False) as fresh:
        say("starting the warm Airflow parent (one-off)")
        started = time.monotonic()
        warm.start()
        timings.parent_start_s = round(time.monotonic() - started, 3)
        for run in range(1, runs + 1):
            say(f"harness run {run}/{runs}")
            migrate_s, task_test_s, succeeded = bench.cli_test()
            timings.cli_migrate_s.append(round(migrate_s, 3))
            timings.cli_task_test_s.append(round(task_test_s, 3))
            timings.cli_task_succeeded.append(succeeded)
            timings.samples_s["cli_test"].append(round(migrate_s + task_test_s, 3))
            timings.samples_s["warm_verify"].append(round(bench.verify(warm), 3))
            timings.warm_timings_ms.append(dict(warm.last_timings))
            timings.samples_s["fresh_verify"].append(round(bench.verify(fresh), 3))
    return timings

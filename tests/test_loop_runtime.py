"""Runtime evidence in the real loop: keys and attributes that exist only while the task runs.

A DAG reads a landing CSV with `csv.DictReader` and a JSON payload into a SimpleNamespace; the
code misspells the key and the attribute, and no literal in the repository names the right
ones. Real Airflow runs the DAG with patchit's callback, which records the failing frame's
locals; the tier-0 fix-its find the real names there, and the Airflow harness verifies each
fix before it lands on a branch.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.fixits.python_keys import RenameKeyStrategy
from patchit.patching.fixits.python_names import FixNameStrategy
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import (
    AIRFLOW,
    LOGICAL_DATE,
    airflow_env,
    migrate_home,
    spooled_events,
)

pytestmark = pytest.mark.slow

DAG = "dags/landing.py"
DAG_SRC = textwrap.dedent(
    '''
    """Invoices and orders from the landing area: their keys exist only at run time."""

    from __future__ import annotations

    import csv
    import json
    import types
    from datetime import datetime
    from pathlib import Path

    from airflow.sdk import dag, task

    from patchit.integrations.airflow import on_failure_callback

    LANDING = Path(__file__).parent / "landing"


    @dag(
        schedule=None,
        start_date=datetime(2024, 1, 1),
        catchup=False,
        default_args={"on_failure_callback": on_failure_callback, "retries": 0},
    )
    def landing():
        @task
        def total_amount():
            total = 0.0
            with open(LANDING / "invoices.csv", newline="") as handle:
                for row in csv.DictReader(handle):
                    total += float(row["amout"])
            return round(total, 2)

        @task
        def order_amount():
            order = types.SimpleNamespace(**json.loads((LANDING / "order.json").read_text()))
            return order.amout * 100

        total_amount()
        order_amount()


    landing()
    '''
).lstrip()
INVOICES = "invoice_id,customer,amount,currency\n9001,acme,99.00,EUR\n9002,birch,29.00,EUR\n"
ORDER = '{"order_id": 7, "amount": 12, "customer": "ada"}\n'


def make_repo(dest: Path) -> Path:
    (dest / "dags" / "landing").mkdir(parents=True)
    (dest / DAG).write_text(DAG_SRC)
    (dest / "dags" / "landing" / "invoices.csv").write_text(INVOICES)
    (dest / "dags" / "landing" / "order.json").write_text(ORDER)
    (dest / ".gitignore").write_text("__pycache__/\n")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "landing: totals from the landing files")
    return dest


def test_keys_and_attributes_known_only_at_run_time_land_verified_branches(
    tmp_path: Path, _patchit_home: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    home = migrate_home(tmp_path / "airflow-home")
    spool_home = tmp_path / "callback-home"
    env = airflow_env(home, repo / "dags", spool_home, tmp_path / "out")
    proc = subprocess.run(
        [AIRFLOW, "dags", "test", "landing", LOGICAL_DATE],
        env=env, capture_output=True, text=True, timeout=600, cwd=repo,
    )  # fmt: skip
    events = spooled_events(spool_home)
    assert set(events) == {"total_amount", "order_amount"}, (proc.stdout + proc.stderr)[-4000:]
    row = events["total_amount"].runtime_locals
    assert row is not None and row.locals["row"].keys == {
        "invoice_id": "str", "customer": "str", "amount": "str", "currency": "str",
    }  # fmt: skip
    for task, strategy in (
        ("total_amount", RenameKeyStrategy()),
        ("order_amount", FixNameStrategy()),
    ):
        static = events[task].model_copy(update={"runtime_locals": None})
        assert strategy.fix(gather_airflow_evidence(static, repo), []) == []  # code alone: no

    ctx = Context(
        home=_patchit_home, memory=Memory.open(_patchit_home), config=PatchitConfig(),
        strategies=[RenameKeyStrategy(), FixNameStrategy()],
        harnesses=[AirflowHarness(timeout_s=120)],
    )  # fmt: skip
    try:
        outcomes = {task: heal(events[task], ctx) for task in ("total_amount", "order_amount")}
    finally:
        ctx.close()

    expected = {
        "total_amount": ('row["amout"]', 'row["amount"]', "python_rename_key"),
        "order_amount": ("order.amout", "order.amount", "python_fix_name"),
    }
    for task, (wrong, right, strategy) in expected.items():
        incident = outcomes[task].incident
        assert incident.status == "fixed", (task, incident.summary)
        assert incident.branch == f"patchit/{incident.id}"
        fixed = git(repo, "show", f"{incident.branch}:{DAG}")
        assert right in fixed and wrong not in fixed
        (attempt,) = ctx.memory.attempts_for(incident.id)
        assert (attempt.strategy, attempt.outcome) == (strategy, "verified")
    assert git(repo, "status", "--porcelain") == ""  # the user's tree is untouched

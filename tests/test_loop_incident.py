"""Heal the change, not the node (issue 28): one commit that breaks two units with different
errors is one incident, one branch, and a candidate is verified on both. Real dbt (DuckDB) and
real Airflow; the fast tests of the grouping are in test_change_groups.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, ClassVar

import pytest

from patchit.memory import Memory
from patchit.memory.fingerprint import cause_key
from patchit.patching.base import Edit, PatchCandidate, Proposal, ProposalRequest
from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import BIN, commit_all, git
from tests.evidence.airflow_failures import (
    AIRFLOW,
    LOGICAL_DATE,
    airflow_env,
    migrate_home,
    spooled_events,
)

pytestmark = pytest.mark.slow

BY_DAY = """select
    order_date,
    count(*) as orders
from {{ ref('stg_orders') }}
group by order_date
"""


def test_one_commit_breaking_two_models_is_one_incident_one_branch_both_pass(
    shop_repo: Path, tmp_path: Path, _patchit_home: Path
) -> None:
    (shop_repo / "models" / "marts" / "orders_by_day.sql").write_text(BY_DAY)
    commit_all(shop_repo, "orders_by_day: orders per day")
    stg = shop_repo / "models" / "staging" / "stg_orders.sql"
    stg.write_text(stg.read_text().replace("as date) as order_date", "as date) as order_dat"))
    broken = commit_all(shop_repo, "stg_orders: tidy the casts")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1, res.stderr
    # two models fail with two different messages (two cause keys: two incidents before)
    said = res.stdout + res.stderr
    assert '"order_date" not found' in said and 'column named "order_date"' in said, said[-6000:]
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr[-3000:]
    report = json.loads(Path(incident["report_json"]).read_text())
    both = {"model.shop.orders", "model.shop.orders_by_day"}
    assert {report["unit_id"], *report["related_units"]} == both
    assert report["unit_verdicts"] == dict.fromkeys(both, "success")
    assert "Units of the incident" in Path(incident["report_md"]).read_text()
    with Memory.open(_patchit_home) as memory:  # two messages, two cause keys: two incidents before
        events = memory.events_for(incident["id"])
    assert {e.unit_id for e in events} == both
    assert len({cause_key(e) for e in events}) == 2
    branch = incident["branch"]
    assert git(shop_repo, "rev-parse", f"{branch}~1") == broken
    assert git(shop_repo, "branch", "--list", "patchit/*").count("patchit/") == 1
    # the branch builds both models from scratch in a fresh clone
    clone = tmp_path / "clone"
    git(shop_repo, "clone", "-q", "--branch", branch, str(shop_repo), str(clone))
    build = subprocess.run(
        [str(BIN / "dbt"), "build", "--profiles-dir", str(clone)],
        cwd=clone, capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-2000:]
    for model in ("orders", "orders_by_day"):
        assert f"model main.{model} " in build.stdout, build.stdout[-2000:]
    assert git(shop_repo, "status", "--porcelain") == ""
    assert git(shop_repo, "rev-parse", "HEAD") == broken


def test_stacked_breaks_are_tried_together_and_held_for_the_revert(
    shop_repo: Path, _patchit_home: Path
) -> None:
    """A column removed in one unmerged commit and a model renamed in the next: the ref fix
    fails on the removed column and the revert of the removal on the rename; together they
    pass, held for review because one half undoes the removal (it was `failed`)."""
    assert patchit_dbt(shop_repo, "build").returncode == 0  # the last good run
    payments = shop_repo / "models" / "staging" / "stg_payments.sql"
    payments.write_text(payments.read_text().replace("    payment_method,\n", ""))
    commit_all(shop_repo, "stg_payments: payment_method moves to the payments mart")
    git(shop_repo, "mv", "models/staging/stg_orders.sql", "models/staging/stg_sales_orders.sql")
    broken = commit_all(shop_repo, "staging: stg_orders is stg_sales_orders")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 2, res.stderr[-3000:]  # dbt's own: the parse failed on the ref
    [incident] = incidents()
    assert incident["status"] == "escalated", res.stderr[-4000:]
    with Memory.open(_patchit_home) as memory:
        attempts = memory.attempts_for(incident["id"])
    # a second joint candidate undoing the same removal is refused unverified (held_again)
    [joined] = [a for a in attempts if a.strategy == "combined" and a.outcome != "refused"]
    assert joined.outcome == "needs_review", joined.reason
    assert "reverts your change: removed column payment_method" in joined.reason
    assert "ref('stg_sales_orders')" in joined.diff and "+    payment_method," in joined.diff
    halves = [a for a in attempts if a.strategy != "combined" and a.outcome == "failed"]
    assert {a.strategy for a in halves} >= {"dbt_fix_ref", "partial_revert"}
    assert incident["review_label"] == (
        "reverts your change: removed column payment_method from stg_payments"
    )
    # the report's "kept the change, tried first" names the forward halves, not the joint one
    forward = json.loads(Path(incident["report_json"]).read_text())["forward_tried"]
    assert any(f.startswith("dbt_fix_ref") for f in forward), forward
    assert not [f for f in forward if f.startswith("combined")], forward
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    assert git(shop_repo, "status", "--porcelain") == ""
    assert git(shop_repo, "rev-parse", "HEAD") == broken


# -- Airflow: two tasks of one DAG failing for one cause -------------------------------------

ETL_DAG = '''"""Two tasks reading the rows of one helper."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task
from etl_lib import load_rows

from patchit.integrations.airflow import on_failure_callback


@dag(
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"on_failure_callback": on_failure_callback, "retries": 0},
)
def etl():
    @task
    def total():
        return sum(row["amount"] for row in load_rows())

    @task
    def biggest():
        return max(row["amount"] for row in load_rows())

    total()
    biggest()


etl()
'''
GOOD_ROWS = '[{"amount": 3}, {"amount": 4}]'
BAD_ROWS = '[{"amout": 3}, {"amout": 4}]'
ETL_LIB = f"""def load_rows():\n    return {GOOD_ROWS}\n"""
ONLY_TOTAL = Edit(path="dags/etl.py", search='sum(row["amount"]', replace='sum(row["amout"]')
BOTH = Edit(path="dags/etl_lib.py", search=BAD_ROWS, replace=GOOD_ROWS)


class TwoCandidates:
    """Tier 0 stand-in: first a fix for one of the two tasks, then the fix of their cause."""

    name: ClassVar[str] = "scripted"
    tag: ClassVar[str] = "other"
    tier: ClassVar[int] = 0

    def propose(self, request: ProposalRequest) -> Proposal:
        scripted = (("wrong_key", "total reads amout", ONLY_TOTAL),
                    ("rename_key", "restore amount", BOTH))  # fmt: skip
        candidates = [
            PatchCandidate(strategy=self.name, tag=tag, rationale=why, edits=[edit])
            for tag, why, edit in scripted
        ]
        return Proposal(candidates=candidates if request.round == 1 else [], more=False)

    def close(self) -> None:
        pass


def test_two_tasks_failing_for_one_cause_are_verified_together(
    tmp_path: Path, _patchit_home: Path
) -> None:
    from patchit.config import PatchitConfig
    from patchit.harnesses.airflow.harness import AirflowHarness
    from patchit.loop.context import Context
    from patchit.worker.worker import Worker

    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "etl.py").write_text(ETL_DAG)
    (repo / "dags" / "etl_lib.py").write_text(ETL_LIB)
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "etl: totals")
    (repo / "dags" / "etl_lib.py").write_text(ETL_LIB.replace(GOOD_ROWS, BAD_ROWS))
    broken = commit_all(repo, "etl_lib: rows from the new feed")
    home = migrate_home(tmp_path / "airflow-home")
    env = airflow_env(home, repo / "dags", _patchit_home, tmp_path / "out")
    run = subprocess.run(
        [AIRFLOW, "dags", "test", "etl", LOGICAL_DATE],
        env=env, capture_output=True, text=True, timeout=600, cwd=repo,
    )  # fmt: skip
    failed = spooled_events(_patchit_home)
    assert set(failed) == {"total", "biggest"}, (run.stdout + run.stderr)[-4000:]
    assert all(e.repo_path == str(repo) and e.commit == broken for e in failed.values())
    harness = AirflowHarness(timeout_s=300)

    def make_context(home: Path, _repo: Path, **kwargs: Any) -> Context:
        return Context(home, kwargs["memory"], PatchitConfig(), [TwoCandidates()], [harness],
                       say=kwargs["say"], owner=kwargs["owner"])  # fmt: skip

    said: list[str] = []
    stats = Worker(_patchit_home, say=said.append, make_context=make_context).run(once=True)
    assert stats.bad == 0, said
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
        attempts = memory.attempts_for(incident.id)
        units = {e.unit_id for e in memory.events_for(incident.id)}
    assert units == {"total", "biggest"}
    assert incident.status == "fixed", "\n".join(said)
    # the fix of one task only is not verified: the other task still failed in the same run
    assert [a.outcome for a in attempts] == ["failed", "verified"], "\n".join(said)
    assert "still failing: biggest" in attempts[0].reason
    assert BOTH.replace in git(repo, "show", f"{incident.branch}:dags/etl_lib.py")
    report = json.loads(Path(incident.report_json or "").read_text())
    assert report["unit_verdicts"] == {"total": "success", "biggest": "success"}
    assert git(repo, "status", "--porcelain") == "" and git(repo, "rev-parse", "HEAD") == broken

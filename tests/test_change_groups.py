"""One incident per breaking change (issue 28, item 1): which failed units of one run the same
change broke, in real git repositories, and what the loop opens for them.

The failures are shaped as dbt and Airflow report them (a dbt run's manifest names what each
node reads; an Airflow task's DAG file imports the repo's modules); nothing here runs dbt or
Airflow. The loop tests use the library's FakeHarness.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.harnesses.fake import FakeHarness
from patchit.loop.change_groups import FailureGroup, group_failures, incident_key
from patchit.loop.context import Context
from patchit.loop.loop import group_by_change, heal_group
from patchit.memory import Memory
from patchit.memory.fingerprint import cause_key
from tests.conftest import commit_all, git

STG = "select 1 as order_id, 'basic' as plan_code\n"
MODELS = {
    "models/stg_orders.sql": STG,
    "models/plans.sql": "select plan_code from {{ ref('stg_orders') }}\n",
    "models/revenue.sql": "select order_id, plan_code from {{ ref('stg_orders') }}\n",
    "models/customers.sql": "select 1 as customer_id\n",
}
UPSTREAM = {"model.shop.plans": ["model.shop.stg_orders"],
            "model.shop.revenue": ["model.shop.stg_orders"]}  # fmt: skip
NO_GOOD = lambda _event: None  # noqa: E731 - no last good commit is known


def manifest(path: Path) -> Path:
    """What a dbt run's manifest says each node reads (only the keys patchit reads)."""
    nodes = {
        f"model.shop.{Path(rel).stem}": {
            "original_file_path": rel,
            "depends_on": {"nodes": UPSTREAM.get(f"model.shop.{Path(rel).stem}", [])},
        }
        for rel in MODELS
    }
    path.write_text(json.dumps({"nodes": nodes, "macros": {}}))
    return path


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    (repo / "models").mkdir(parents=True)
    (repo / "dbt_project.yml").write_text("name: shop\nversion: '1'\nprofile: shop\n")
    for rel, sql in MODELS.items():
        (repo / rel).write_text(sql)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop: models")
    return repo


def dbt_failure(
    repo: Path, model: str, message: str, status: str = "error"
) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source="dbt", pipeline_id="shop", unit_id=f"model.shop.{model}",
        unit_path=f"models/{model}.sql", status=status, error_type="Runtime Error",
        error_message=message, repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
        artifacts={"manifest": str(manifest(repo.parent / "manifest.json"))},
        dbt=DbtInvocation(command="build", project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip


def change(repo: Path, rel: str, old: str, new: str, message: str) -> str:
    path = repo / rel
    path.write_text(path.read_text().replace(old, new))
    return commit_all(repo, message)


def units(groups: list[FailureGroup]) -> list[list[str]]:
    return [[e.unit_id.rsplit(".", 1)[-1] for e in g.events] for g in groups]


PLAN = 'Binder Error: Referenced column "plan_code" not found in FROM clause!'
ORDER = 'Binder Error: Table "stg_orders" does not have a column named "plan_code"'


def test_two_units_one_change_touching_what_both_read_are_one_group(shop: Path) -> None:
    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    events = [dbt_failure(shop, "plans", PLAN), dbt_failure(shop, "revenue", ORDER)]
    assert cause_key(events[0]) != cause_key(events[1])  # two messages: two incidents before
    (group,) = group_failures(events, NO_GOOD)
    assert units([group]) == [["plans", "revenue"]]
    assert group.files == ("models/stg_orders.sql",)
    assert group.commits == (git(shop, "rev-parse", "HEAD"),)
    assert "broken by" in group.describe() and "plans, model.shop.revenue" in group.describe()


def test_units_broken_by_unrelated_changes_are_two_groups(shop: Path) -> None:
    good = git(shop, "rev-parse", "HEAD")
    change(shop, "models/plans.sql", "plan_code", "plan_cod", "plans: typo")
    change(shop, "models/customers.sql", "customer_id", "customer_idd", "customers: typo")
    events = [dbt_failure(shop, "plans", PLAN), dbt_failure(shop, "customers", PLAN)]
    assert cause_key(events[0]) == cause_key(events[1])  # one message: one incident before
    groups = group_failures(events, lambda _event: good)
    assert units(groups) == [["plans"], ["customers"]]
    assert [g.files for g in groups] == [("models/plans.sql",), ("models/customers.sql",)]
    assert groups[0].key != groups[1].key


def test_a_new_breaking_commit_is_a_new_key_an_unrelated_one_is_not(shop: Path) -> None:
    good = git(shop, "rev-parse", "HEAD")
    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    first = incident_key(dbt_failure(shop, "plans", PLAN), lambda _event: good)
    (shop / "README.md").write_text("the shop\n")
    commit_all(shop, "docs")
    assert incident_key(dbt_failure(shop, "plans", PLAN), lambda _event: good) == first
    change(shop, "models/stg_orders.sql", "1 as", "2 as", "stg: another change")
    again = dbt_failure(shop, "plans", PLAN)  # the very same error text
    assert incident_key(again, lambda _event: good) != first


def test_a_unit_the_change_does_not_touch_keeps_its_cause_key(shop: Path) -> None:
    change(shop, "models/customers.sql", "customer_id", "customer_idd", "customers: typo")
    data = dbt_failure(shop, "plans", "Conversion Error: Could not convert 'x' to INT32")
    (group,) = group_failures([data], lambda _event: git(shop, "rev-parse", "HEAD~1"))
    assert group.key == cause_key(data) and group.files == ()


def test_an_untouched_unit_with_the_cause_of_a_touched_one_joins_its_group(shop: Path) -> None:
    good = git(shop, "rev-parse", "HEAD")
    change(shop, "models/plans.sql", "plan_code", "plan_cod", "plans: typo")
    touched = dbt_failure(shop, "plans", "Compilation Error: macro 'x' is undefined")
    untouched = dbt_failure(shop, "customers", "Compilation Error: macro 'x' is undefined")
    (group,) = group_failures([touched, untouched], lambda _event: good)
    assert units([group]) == [["plans", "customers"]] and group.files == ("models/plans.sql",)


def test_an_outage_stays_one_group_by_cause_whatever_the_change_touched(shop: Path) -> None:
    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    refused = "could not connect to server: Connection refused"
    events = [dbt_failure(shop, m, refused) for m in ("plans", "revenue", "customers")]
    (group,) = group_failures(events, NO_GOOD)
    assert group.key == cause_key(events[0]) and group.files == ()
    assert group.describe().startswith("3 failed unit(s) of one cause: model.shop.plans")


def test_errors_come_before_failing_tests_and_unreadable_changes_fall_back(shop: Path) -> None:
    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    test = dbt_failure(shop, "plans", "Got 3 results, configured to fail if != 0", "fail")
    error = dbt_failure(shop, "revenue", ORDER)
    (group,) = group_failures([test, error], NO_GOOD)
    assert units([group]) == [["revenue", "plans"]]
    gone = error.model_copy(update={"commit": "0" * 40})  # a commit this clone lacks
    assert group_failures([gone], NO_GOOD)[0].key == cause_key(gone)


AIRFLOW_DAG = """from etl_lib import load, total\n\ndef extract():\n    return load()\n"""
AIRFLOW_LIB = """def load():\n    return [{"amount": 3}]\n\n\ndef total(rows):\n    return 0\n"""


def airflow_failure(repo: Path, task: str, message: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source="airflow", pipeline_id="etl", unit_id=task, unit_path="dags/etl.py",
        error_type="KeyError", error_message=message, repo_path=str(repo),
        commit=git(repo, "rev-parse", "HEAD"),
    )  # fmt: skip


def test_two_tasks_of_a_dag_broken_by_its_module_are_one_group(tmp_path: Path) -> None:
    repo = tmp_path / "dags-repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "etl.py").write_text(AIRFLOW_DAG)
    (repo / "dags" / "etl_lib.py").write_text(AIRFLOW_LIB)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "etl")
    change(repo, "dags/etl_lib.py", '"amount"', '"amt"', "lib: rename amount")
    events = [airflow_failure(repo, "extract", "'amount'"),
              airflow_failure(repo, "total", "TypeError: unsupported operand")]  # fmt: skip
    (group,) = group_failures(events, NO_GOOD)
    assert [e.unit_id for e in group.events] == ["extract", "total"]
    assert group.files == ("dags/etl_lib.py",)


# -- the loop: incidents ------------------------------------------------------------------------


@pytest.fixture
def memory(_patchit_home: Path) -> Iterator[Memory]:
    with Memory.open(_patchit_home) as memory:
        yield memory


def heal_run(home: Path, memory: Memory, events: list[UniversalFailureEvent]) -> list[str]:
    """Heal one run's failures as the wrapper does; the incident ids, by group."""
    ctx = Context(home, memory, PatchitConfig(), [], [FakeHarness()])
    try:
        groups = group_by_change(events, memory)
        return [heal_group(g.events, ctx, g.key).incident.id for g in groups]
    finally:
        ctx.close()


def test_the_loop_opens_one_incident_for_one_change_and_a_new_one_for_a_new_commit(
    shop: Path, memory: Memory, _patchit_home: Path
) -> None:
    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    first = [dbt_failure(shop, "plans", PLAN), dbt_failure(shop, "revenue", ORDER)]
    (incident_id,) = heal_run(_patchit_home, memory, first)
    assert {e.unit_id for e in memory.events_for(incident_id)} == {
        "model.shop.plans", "model.shop.revenue"}  # fmt: skip
    # the next schedule at the same commit: the same incident
    assert heal_run(_patchit_home, memory, [dbt_failure(shop, "plans", PLAN)]) == [incident_id]
    # a new commit breaks stg_orders again, with the very same error text: a new incident
    change(shop, "models/stg_orders.sql", "1 as", "2 as", "stg: another change")
    (fresh,) = heal_run(_patchit_home, memory, [dbt_failure(shop, "plans", PLAN)])
    assert fresh != incident_id
    assert len(memory.list_incidents()) == 2


def test_without_a_last_good_commit_a_later_unrelated_commit_finds_the_incident_again(
    shop: Path, memory: Memory, _patchit_home: Path
) -> None:
    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    (incident_id,) = heal_run(_patchit_home, memory, [dbt_failure(shop, "plans", PLAN)])
    (shop / "README.md").write_text("the shop\n")
    commit_all(shop, "docs")  # the range is now only this commit: it touches nothing
    assert heal_run(_patchit_home, memory, [dbt_failure(shop, "plans", PLAN)]) == [incident_id]


def test_a_run_recorded_without_healing_opens_the_incidents_a_heal_finds_again(
    shop: Path, memory: Memory, _patchit_home: Path
) -> None:
    from patchit.worker.dbt_wrapper import record_only

    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    failures = [dbt_failure(shop, "plans", PLAN), dbt_failure(shop, "revenue", ORDER)]
    record_only(failures, memory, "--no-heal was given")
    [recorded] = memory.list_incidents()
    assert recorded.status == "open" and recorded.events == 2
    assert recorded.summary == (
        f"recorded, not healed (--no-heal was given): `patchit heal {recorded.id}` heals it"
    )
    again = [dbt_failure(shop, "plans", PLAN), dbt_failure(shop, "revenue", ORDER)]
    assert heal_run(_patchit_home, memory, again) == [recorded.id]
    assert not memory.get_incident(recorded.id).summary.startswith("recorded, not healed")


def test_the_same_failures_at_the_same_commit_stay_in_the_incident_holding_them(
    shop: Path, memory: Memory, _patchit_home: Path
) -> None:
    """A run recorded by cause key (its repository unknown then, or an older patchit) is
    healed in that incident once the change can be read; a new commit still opens another."""
    from patchit.memory.fingerprint import error_fingerprint

    change(shop, "models/stg_orders.sql", "plan_code", "plan", "stg: rename plan_code")
    old = dbt_failure(shop, "plans", PLAN)
    recorded, _ = memory.open_or_attach(old, error_fingerprint(old), cause_key(old))
    again = [dbt_failure(shop, "plans", PLAN), dbt_failure(shop, "revenue", ORDER)]
    assert heal_run(_patchit_home, memory, again) == [recorded.id]
    change(shop, "models/stg_orders.sql", "1 as", "2 as", "stg: another change")
    assert heal_run(_patchit_home, memory, [dbt_failure(shop, "plans", PLAN)]) != [recorded.id]


def test_a_root_commit_is_no_change_to_group_by(tmp_path: Path) -> None:
    """A repository's first commit changed every file: two unrelated failures of a DAG first
    committed with both bugs stay two incidents, by cause."""
    repo = tmp_path / "fresh"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "etl.py").write_text(AIRFLOW_DAG)
    (repo / "dags" / "etl_lib.py").write_text(AIRFLOW_LIB)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "etl")
    events = [airflow_failure(repo, "extract", "'amount'"),
              airflow_failure(repo, "total", "name 'totl' is not defined")]  # fmt: skip
    groups = group_failures(events, NO_GOOD)
    assert [g.key for g in groups] == [cause_key(e) for e in events]


TWO_TASKS = """from airflow.sdk import dag, task
from etl_lib import load


@dag(schedule=None)
def etl():
    @task
    def extract():
        return load()

    @task
    def total():
        return 0

    extract()
    total()


etl()
"""


def test_a_bug_written_into_one_task_is_not_the_change_of_another(tmp_path: Path) -> None:
    repo = tmp_path / "two-tasks"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "etl.py").write_text(TWO_TASKS)
    (repo / "dags" / "etl_lib.py").write_text(AIRFLOW_LIB)
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "etl")
    change(repo, "dags/etl.py", "return load()", "return lod()", "extract: tidy")
    extract = airflow_failure(repo, "extract", "name 'lod' is not defined")
    total = airflow_failure(repo, "total", "the warehouse said no")
    groups = group_failures([extract, total], NO_GOOD)
    assert [g.files for g in groups] == [("dags/etl.py",), ()]
    # a line at the DAG's level is every task's change
    change(repo, "dags/etl.py", "@dag(schedule=None)", '@dag(schedule="@daily")', "daily")
    extract = airflow_failure(repo, "extract", "name 'lod' is not defined")
    total = airflow_failure(repo, "total", "the warehouse said no")
    (group,) = group_failures([extract, total], NO_GOOD)
    assert group.files == ("dags/etl.py",)

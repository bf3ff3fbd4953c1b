"""Healing on the user's own Airflow, end to end: a real API server, scheduler, DAG processor
and LocalExecutor on a Postgres metadata DB (a throw-away cluster). The user's repo ships the
one-line `patchit_heal` DAG and `[airflow] heal = "dag"`; a task fails under the scheduler ->
its callback triggers `patchit_heal` through the REST API -> the heal runs as an Airflow task
-> the incident is `fixed` in the deployment's shared state (`[state] url`, a Postgres database
of the same cluster), its branch holds the fix, and the user's checkout is as it was."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from patchit.cli.demo_airflow import attach_callback
from patchit.examples import AIRFLOW_PROJECT
from tests.conftest import commit_all, git, seed_airflow_template
from tests.delivery.airflow_deployment import airflow_deployment
from tests.delivery.test_e2e_airflow import HELPER, incident_of, patchit, typo
from tests.pg_cluster import PgCluster

pytestmark = pytest.mark.slow

HEAL_DAG_FILE = "from patchit.integrations.airflow_heal import dag  # noqa: F401\n"
# a deployment that alerts patchit from every task, the heal DAG's own included
EVERY_TASK_ALERTS = """\
from patchit.integrations.airflow import on_failure_callback


def task_policy(task):
    if not task.on_failure_callback:
        task.on_failure_callback = [on_failure_callback]  # Airflow 3 keeps a list here
"""


def user_repo(dest: Path) -> Path:
    """The example DAGs alerting patchit, the heal DAG and `heal = "dag"`; then a typo."""
    shutil.copytree(AIRFLOW_PROJECT, dest, ignore=shutil.ignore_patterns("output", "__pycache__"))
    (dest / ".gitignore").write_text("output/\n__pycache__/\n")
    attach_callback(dest / "dags" / "shop_orders.py")
    (dest / "dags" / "patchit_heal.py").write_text(HEAL_DAG_FILE)
    (dest / ".patchit.toml").write_text('[airflow]\nheal = "dag"\n')
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "shop_orders: heal failures on our Airflow")
    typo(dest, '+ order["amount_cents"]', '+ order["amount_cent"]', "transforms: revenue in cents")
    return dest


def checkout_state(repo: Path) -> tuple[str, str, str]:
    return (
        git(repo, "status", "--porcelain", "--ignored"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
    )


def test_a_failed_task_is_healed_by_the_patchit_heal_dag_on_postgres_airflow(
    tmp_path: Path, pg: PgCluster
) -> None:
    started = time.monotonic()
    database = f"airflow_{tmp_path.name.lower().replace('-', '_')}"[:60]
    pg.execute(f'create database "{database}"')
    url = f"postgresql+psycopg2://{pg.user}@{pg.host}:{pg.port}/{database}"
    home = tmp_path / "patchit-home"
    # the deployment's shared state: spool and memory in Postgres, for every worker
    state_db = f"patchit_{database}"[:60]
    pg.execute(f'create database "{state_db}"')
    home.mkdir()
    seed_airflow_template(home)  # the heal task's Airflow template, as after a first heal
    state_url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{state_db}"
    (home / "patchit.toml").write_text(f'[state]\nurl = "{state_url}"\n')
    repo = user_repo(tmp_path / "repo")
    before = checkout_state(repo)
    with airflow_deployment(
        repo / "dags", tmp_path / "airflow", home, database_url=url,
        local_settings=EVERY_TASK_ALERTS,
    ) as af:  # fmt: skip
        af.wait_for_dag("patchit_heal")
        af.wait_for_dag("shop_orders")
        assert af.run_dag("shop_orders", "2024-01-02") == "failed"
        [run] = af.wait_for_runs("patchit_heal")
        heal_log = af.task_log("patchit_heal")
        assert run["state"] == "success", heal_log
        assert run["dag_run_id"].startswith("patchit__shop_orders.summarise__"), run
        assert run["conf"]["event"]["unit_id"] == "summarise"

        # the heal DAG's own failure alerts patchit (the policy) but is never handed over
        af.call("POST", "/dags/patchit_heal/dagRuns", {
            "dag_run_id": "by_hand", "logical_date": None, "conf": {"event": {"x": 1}},
        })  # fmt: skip
        runs = af.wait_for_runs("patchit_heal", count=2)
        assert sorted(r["state"] for r in runs) == ["failed", "success"], runs
        refused = af.task_log("patchit_heal")
        assert "dag_run.conf event: does not match the event schema" in refused
        assert "not healing a failure of patchit_heal, patchit's own heal DAG" in refused
        time.sleep(3)  # a heal run triggered by that failure would be listed by now
        assert len(af.call("GET", "/dags/patchit_heal/dagRuns")["dag_runs"]) == 2

        doctor = patchit(home, "doctor", "--repo", str(repo), PATCHIT_AIRFLOW_API_URL=af.url)
        line = f"ok    airflow heal: dag: patchit_heal on {af.url}, unpaused"
        assert line in doctor.stdout.splitlines(), doctor.stdout
    assert not (home / "spool").exists(), "handed over, so nothing was spooled"
    incident = incident_of(home)
    assert incident["status"] == "fixed", (incident, heal_log)
    branch = str(incident["branch"])
    assert branch == f"patchit/{incident['id']}"
    assert 'order["amount_cents"]' in git(repo, "show", branch, "--", HELPER)
    assert checkout_state(repo) == before
    listed = patchit(home, "incidents", "--json")
    assert json.loads(listed.stdout)[0]["classification"] == "code_bug"
    # fixed in the shared memory: the Postgres state holds it, no SQLite file was made
    shared = pg.execute("select id, status from incidents", dbname=state_db)
    assert shared == [(incident["id"], "fixed")]
    assert not (home / "memory").exists()
    took = time.monotonic() - started
    migrated = (af.logs / "migrate.txt").read_text().strip()
    print(f"patchit_heal end to end: {took:.0f} s ({migrated})")

"""The Airflow part of `patchit demo`: a DAG breaks, the callback spools, the worker heals.

Everything runs as a user would run it: `airflow dags test` with patchit's callback attached
(an isolated `AIRFLOW_HOME` in the demo dir), then `patchit worker --once`, then the DAG again
from a clone of the fix branch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule

from patchit.examples import AIRFLOW_PROJECT

AIRFLOW = str(Path(sys.executable).parent / "airflow")
DAG_FILE = "dags/shop_orders.py"
HELPER = "dags/shop_lib/transforms.py"
CALLBACK_IMPORT = "from patchit.integrations.airflow import on_failure_callback\n"


def _airflow_env(airflow_home: Path, dags: Path, patchit_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(airflow_home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="True",
        PATCHIT_HOME=str(patchit_home),
    )
    return env


def _run(cmd: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> int:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    return proc.returncode


def attach_callback(dag: Path) -> None:
    """Make the example `shop_orders` DAG alert patchit when a task fails, no retries."""
    dag.write_text(
        dag.read_text()
        .replace("from shop_lib.transforms", CALLBACK_IMPORT + "from shop_lib.transforms")
        .replace("catchup=False)", 'catchup=False,\n     default_args={"on_failure_callback": '
                 'on_failure_callback, "retries": 0})')
    )  # fmt: skip


def run_airflow_demo(
    base: Path, home: Path, log: Path, console: Console, git: Any, commit: Any
) -> dict[str, Any] | None:
    """Break the example DAG, heal it through the callback and the worker; the incident."""
    repo = base / "pipelines"
    shutil.copytree(AIRFLOW_PROJECT, repo, ignore=shutil.ignore_patterns("output", "__pycache__"))
    (repo / ".gitignore").write_text("output/\n__pycache__/\n")
    attach_callback(repo / DAG_FILE)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "shop_orders: alert patchit when a task fails")

    console.print(Rule("[bold]5. Airflow: a task breaks in a repo helper module"))
    helper = repo / HELPER
    helper.write_text(
        helper.read_text().replace('+ order["amount_cents"]', '+ order["amount_cent"]')
    )
    commit(repo, "transforms: revenue in cents")
    console.print('  dags/shop_lib/transforms.py: order["amount_cents"] -> order["amount_cent"]')
    airflow_home = base / "airflow-home"
    env = _airflow_env(airflow_home, repo / "dags", home)
    with console.status("airflow db migrate; airflow dags test shop_orders (it fails) ..."):
        _run([AIRFLOW, "db", "migrate"], env, log)
        _run([AIRFLOW, "dags", "test", "shop_orders", "2024-01-02"], env, log, cwd=repo)
    with console.status("patchit worker --once (the callback spooled the failure) ..."):
        _run([sys.executable, "-m", "patchit", "worker", "--once"], {**os.environ,
             "PATCHIT_HOME": str(home)}, log)  # fmt: skip
    listed = subprocess.run(
        [sys.executable, "-m", "patchit", "incidents", "--json"],
        env={**os.environ, "PATCHIT_HOME": str(home)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    mine = [i for i in json.loads(listed.stdout) if i.get("repo_path") == str(repo.resolve())]
    if not mine:
        console.print(f"  no incident was recorded; see {log}")
        return None
    incident: dict[str, Any] = mine[0]
    console.print(
        f"  incident {incident['id']}: {incident['status']} ({incident['classification']}),"
        f" branch {incident['branch']}", markup=False,
    )  # fmt: skip
    if incident["branch"]:
        console.print(
            git(repo, "show", "--format=", str(incident["branch"])), markup=False, soft_wrap=True
        )
        clone = base / "pipelines-fix"
        git(repo, "clone", "-q", "--branch", str(incident["branch"]), str(repo), str(clone))
        with console.status("airflow dags test shop_orders on the fix branch ..."):
            code = _run([AIRFLOW, "dags", "test", "shop_orders", "2024-01-03"],
                        _airflow_env(airflow_home, clone / "dags", base / "unused"), log,
                        cwd=clone)  # fmt: skip
        spooled = (base / "unused" / "spool").exists()
        ok = code == 0 and not spooled
        console.print(f"  on {incident['branch']}: airflow dags test "
                      f"{'passes' if ok else 'still fails'}")  # fmt: skip
        incident["dag_passes_on_branch"] = ok
    return incident

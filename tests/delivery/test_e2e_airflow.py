"""The whole Airflow path on a real deployment (API server, scheduler, DAG processor): a task
fails under the scheduler -> the callback spools it -> `patchit worker --once` lands a verified
branch -> `patchit pr` (a bare remote and a local server speaking GitHub's pulls API) -> the
branch is merged -> the next run, read back through the REST API by
`patchit track`, is green: `fixed`. Then a later commit brings the bug back: the next run fails
the same way, and the fix reads `regression`, reopened."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.cli.demo_airflow import attach_callback
from patchit.examples import AIRFLOW_PROJECT
from tests.conftest import commit_all, git, seed_airflow_template
from tests.delivery.airflow_deployment import airflow_deployment
from tests.delivery.github_server import FakeGitHub, serve

pytestmark = pytest.mark.slow

HELPER = "dags/shop_lib/transforms.py"
TOKEN = "ghp_" + "a" * 36


def user_repo(dest: Path) -> Path:
    """The example DAGs in a git repo, shop_orders alerting patchit, then a typo committed."""
    shutil.copytree(AIRFLOW_PROJECT, dest, ignore=shutil.ignore_patterns("output", "__pycache__"))
    (dest / ".gitignore").write_text("output/\n__pycache__/\n")
    attach_callback(dest / "dags" / "shop_orders.py")
    git(dest, "init", "-q", "-b", "main")
    commit_all(dest, "shop_orders: alert patchit when a task fails")
    typo(dest, '+ order["amount_cents"]', '+ order["amount_cent"]', "transforms: revenue in cents")
    return dest


def typo(repo: Path, old: str, new: str, message: str) -> None:
    helper = repo / HELPER
    text = helper.read_text()
    assert old in text
    helper.write_text(text.replace(old, new))
    commit_all(repo, message)


def patchit(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchit", *args],
        env={**os.environ, "PATCHIT_HOME": str(home), **env},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def incident_of(home: Path) -> dict[str, object]:
    listed = patchit(home, "incidents", "--json")
    assert listed.returncode == 0, listed.stderr
    [incident] = json.loads(listed.stdout)
    return dict(incident)


def test_a_merged_fix_is_tracked_through_the_airflow_api(tmp_path: Path) -> None:
    home = seed_airflow_template(tmp_path / "patchit-home")  # migrated, as after a first heal
    repo = user_repo(tmp_path / "repo")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    with (
        airflow_deployment(repo / "dags", tmp_path / "airflow", home) as airflow,
        serve(FakeGitHub("acme/dags", remote, TOKEN)) as github,
    ):
        home.mkdir(parents=True, exist_ok=True)
        (home / "patchit.toml").write_text(  # the operator's: where the token goes
            f'[delivery]\nprovider = "github"\nrepo = "acme/dags"\napi_url = "{github.url}"\n'
        )
        airflow.wait_for_dag("shop_orders")
        assert airflow.run_dag("shop_orders", "2024-01-02") == "failed"

        healed = patchit(home, "worker", "--once")
        assert healed.returncode == 0, healed.stdout + healed.stderr
        incident = incident_of(home)
        assert incident["status"] == "fixed", (incident, healed.stdout, healed.stderr)
        branch = str(incident["branch"])
        assert 'order["amount_cents"]' in git(repo, "show", branch, "--", HELPER)

        opened = patchit(home, "pr", str(incident["id"]), GITHUB_TOKEN=TOKEN)
        assert opened.returncode == 0, opened.stdout + opened.stderr
        assert github.pulls[1]["head"]["ref"] == branch
        assert "amount_cents" in github.pulls[1]["body"]

        pending = patchit(home, "track", "--airflow-api", airflow.url)
        assert f"{incident['id']}: pending (not merged into main)" in pending.stdout

        git(repo, "merge", "-q", "--no-ff", "-m", "merge the fix", branch)
        assert airflow.run_dag("shop_orders", "2024-01-03") == "success"
        fixed = patchit(home, "track", "--airflow-api", airflow.url)
        assert fixed.returncode == 0, fixed.stderr
        assert f"{incident['id']}: fixed (shop_orders.summarise passed at" in fixed.stdout

        # the fix does not hold: a later commit brings the typo back, the DAG fails again
        typo(repo, '+ order["amount_cents"]', '+ order["amount_cent"]', "transforms: tidy up")
        assert airflow.run_dag("shop_orders", "2024-01-04") == "failed"
        again = patchit(home, "track", "--airflow-api", airflow.url)
        assert f"{incident['id']}: regression (shop_orders.summarise" in again.stdout, again
        reopened = incident_of(home)
        assert (reopened["status"], reopened["outcome"]) == ("open", "regression")
        assert branch in str(reopened["summary"])

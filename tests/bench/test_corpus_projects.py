"""The base projects written for change-level scenarios (issue 28): each is used, carries the
shapes the issue asks for with what their fix must keep, and, in the slow tier, builds green
with the pinned dbt (the Airflow one is run green by every bench's good run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.bench.corpus import DEFAULT_CORPUS
from patchit.bench.corpus_model import load_corpus, projects_dir

NEW_PROJECTS = {"shop": "dbt", "ledger": "dbt", "shop_etl": "airflow"}
SCENARIOS = [s for s in load_corpus(DEFAULT_CORPUS) if s.project in NEW_PROJECTS]


def test_the_new_projects_hold_thirty_change_level_scenarios_each_with_keeps() -> None:
    assert len(SCENARIOS) >= 30
    assert {s.project for s in SCENARIOS} == set(NEW_PROJECTS)
    assert [s.name for s in SCENARIOS if not s.keeps] == []
    traps = [s for s in SCENARIOS if s.trap]
    assert len(traps) >= 4 and all(s.expect == "refused" for s in traps)
    escalated = {(s.project, s.expect_class) for s in SCENARIOS if s.expect == "escalated"}
    assert ("ledger", "data_issue") in escalated  # the upstream type change under a package


def test_the_source_package_is_committed_not_ignored() -> None:
    """The bench commits the project with `git add -A`: an ignored dbt_packages/ would leave
    every checkout without its sources, and `dbt deps` cannot run offline."""
    ledger = projects_dir(DEFAULT_CORPUS) / "ledger"
    assert (ledger / "dbt_packages/stripe_source/dbt_project.yml").is_file()
    assert "dbt_packages" not in (ledger / ".gitignore").read_text()
    staging = sorted((ledger / "dbt_packages/stripe_source/models").glob("stg_*.sql"))
    assert len(staging) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, kind in NEW_PROJECTS.items() if kind == "dbt"])
def test_each_new_dbt_project_builds_green(name: str, tmp_path: Path) -> None:
    project = shutil.copytree(projects_dir(DEFAULT_CORPUS) / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dbt"), "build"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "ERROR=0" in proc.stdout and "WARN=0" in proc.stdout

"""An upgrade of dbt or its adapter under unchanged code: real dbt-duckdb, real git, SQLite.

A green `patchit dbt -- build` keeps what ran it with the last good commit; a failure of the
same code under another adapter version is the environment's (`env_mismatch`), not a bug.
The test cannot install a second adapter here, so it records the earlier green run as made
by an older dbt-duckdb, as a machine upgraded since would have it."""

from __future__ import annotations

import os
import sqlite3
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit_dbt, user_state
from tests.conftest import commit_all, git

pytestmark = pytest.mark.slow

NOW = f"dbt={version('dbt-core')} duckdb={version('dbt-duckdb')}"


def _memory() -> sqlite3.Connection:
    return sqlite3.connect(Path(os.environ["PATCHIT_HOME"]) / "memory" / "attempts.sqlite3")


def test_a_config_refused_after_an_adapter_upgrade_is_the_environments(shop_repo: Path) -> None:
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 0, res.stderr
    with _memory() as db:
        [(key, runtime)] = db.execute("select project_key, runtime from last_good").fetchall()
    assert runtime == NOW  # what ran the green build, from dbt's AdapterRegistered event
    # a model whose config this dbt refuses (a contract with no columns), committed as if an
    # older adapter had built it green at this very commit
    model = shop_repo / "models" / "marts" / "contracted.sql"
    model.write_text(
        "{{ config(materialized='table', contract={'enforced': true}) }}\nselect 1 as id\n"
    )
    commit_all(shop_repo, "contracted")
    head = git(shop_repo, "rev-parse", "HEAD")
    older = f"dbt={version('dbt-core')} duckdb=1.9.0"
    with _memory() as db:
        db.execute('update last_good set "commit" = ?, runtime = ? where project_key = ?',
                   (head, older, key))  # fmt: skip
    before = user_state(shop_repo)
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1, res.stderr
    [incident] = incidents()
    assert incident["status"] == "escalated", res.stderr
    assert incident["classification"] == "env_mismatch"
    assert f"duckdb 1.9.0 -> {version('dbt-duckdb')}" in incident["summary"]
    after = user_state(shop_repo)  # the database is dbt's own run's to write, as plain dbt does
    assert {k: v for k, v in after.items() if k != "db"} == {
        k: v for k, v in before.items() if k != "db"
    }


def test_the_same_failure_under_the_same_adapter_is_still_code(shop_repo: Path) -> None:
    model = shop_repo / "models" / "marts" / "contracted.sql"
    model.write_text(
        "{{ config(materialized='table', contract={'enforced': true}) }}\nselect 1 as id\n"
    )
    commit_all(shop_repo, "contracted")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1, res.stderr
    [incident] = incidents()
    assert incident["classification"] == "code_bug", incident["summary"]

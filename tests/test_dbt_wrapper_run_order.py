"""A first build on an empty warehouse, of a project whose sources are relations it builds
itself (the public Saurabh-DS/datavault-dbt-duckdb-medallion declares its seeds as sources):
the source's test runs before what writes the table and fails on a table that does not exist
yet. The incident is the environment's (`env_mismatch`),
with what to run, not a code bug ending `failed`; no branch; a second build is green.
Real dbt (DuckDB) and git."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import committed_repo, git

pytestmark = pytest.mark.slow

FILES = {
    "dbt_project.yml": "name: vault\nprofile: vault\nconfig-version: 2\n",
    "macros/generate_schema_name.sql": "{% macro generate_schema_name(custom, node) -%}\n"
    "{{ custom if custom else target.schema }}\n{%- endmacro %}\n",
    "profiles.yml": "vault:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
    "      path: vault.duckdb\n      threads: 1\n",
    "seeds/claims_landing.csv": "claim_id,amount\nc1,10\nc2,20\n",
    # the raw table the sources declare, written by the project itself (as the datavault's
    # seeds are): dbt orders it after the seed it reads, and the source's test (no edge to
    # it) before it
    "models/raw/raw_claims.sql": "{{ config(schema='raw', materialized='table') }}\n"
    "select * from {{ ref('claims_landing') }}\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: raw\n    schema: raw\n"
    "    tables:\n      - name: raw_claims\n        columns:\n          - name: claim_id\n"
    "            data_tests: [not_null]\n",
    "models/stg_claims.sql": "select claim_id, amount from {{ source('raw', 'raw_claims') }}\n",
    ".gitignore": "target/\nlogs/\n*.duckdb\n*.duckdb.wal\n",
}


def test_a_source_read_before_the_run_built_it_is_the_environments(
    tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "vault"
    committed_repo(repo, FILES, "vault")
    res = patchit_dbt(repo, "build")
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    found = incidents()
    assert found and all(
        (i["status"], i["classification"]) == ("escalated", "env_mismatch") for i in found
    ), res.stderr[-3000:]
    report = json.loads(Path(found[0]["report_json"]).read_text())
    text = json.dumps(report)
    assert "raw.raw_claims" in text and "dbt seed" in text
    assert git(repo, "branch", "--list", "patchit/*") == ""
    assert git(repo, "status", "--porcelain") == ""
    assert patchit_dbt(repo, "build").returncode == 0  # the seed is there now

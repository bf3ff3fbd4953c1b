"""A source's column changes type in the warehouse between two runs, the code does not: the
green run through `patchit dbt -- build` records the sources' column types, the failing one is
escalated as upstream schema drift (`data_issue`) naming the column and both types, and no
branch is made (it was a code bug ending `failed`; found on yurizza/classicmodels-dbt-duckdb).
Real dbt (DuckDB) and git."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from patchit.memory import Memory
from patchit.memory.outcomes import project_key_for
from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import committed_repo, git

pytestmark = pytest.mark.slow

FILES = {
    "dbt_project.yml": "name: lines\nprofile: lines\nconfig-version: 2\n",
    "profiles.yml": "lines:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
    "      path: lines.duckdb\n      threads: 1\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: raw\n    schema: main\n"
    "    tables:\n      - name: order_lines\n",
    "models/stg_lines.sql": "select orderNumber as order_id, quantity, priceEach as price\n"
    "from {{ source('raw', 'order_lines') }}\n",
    "models/fct_lines.sql": "select order_id, round(quantity * price, 2) as revenue\n"
    "from {{ ref('stg_lines') }}\n",
    ".gitignore": "target/\nlogs/\n*.duckdb\n*.duckdb.wal\n",
}


def _load(repo: Path, price_type: str) -> None:
    with duckdb.connect(str(repo / "lines.duckdb")) as con:
        con.execute(
            f"create or replace table order_lines as select 10100 as orderNumber,"
            f" 30 as quantity, cast('136.0' as {price_type}) as priceEach"
        )


def test_a_source_column_that_changed_type_is_escalated_as_drift(
    tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "lines"
    good = committed_repo(repo, FILES, "lines")
    _load(repo, "double")
    res = patchit_dbt(repo, "build")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    with Memory.open(_patchit_home) as memory:
        key = project_key_for(repo, repo)
        assert memory.last_good(key) == good
        recorded = json.loads(memory.last_good_source_types(key) or "{}")
    assert recorded["raw.order_lines"]["columns"]["priceEach"] == "DOUBLE"
    _load(repo, "varchar")  # the loader now delivers the price as text
    res = patchit_dbt(repo, "build")
    assert res.returncode == 1, res.stderr[-3000:]
    [incident] = incidents()
    assert (incident["status"], incident["classification"]) == ("escalated", "data_issue"), (
        res.stderr[-3000:]
    )
    report = json.loads(Path(incident["report_json"]).read_text())
    assert "raw.order_lines.priceEach DOUBLE -> VARCHAR" in json.dumps(report)
    assert git(repo, "branch", "--list", "patchit/*") == ""
    assert git(repo, "status", "--porcelain") == ""

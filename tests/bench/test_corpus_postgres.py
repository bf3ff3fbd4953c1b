"""The corpus on Postgres (`patchit bench --warehouse postgres`): dbt scenarios through the
real runner on a throw-away PostgreSQL cluster: an escalation, and a fix that needs the
warehouse's columns (an upstream rename read through a subquery, its columns from
information_schema on Postgres), its branch's hidden check matching the good commit's. The
full run is `patchit bench --warehouse postgres`.

Run elsewhere, not here again: the column typo healed on Postgres end to end, its data check
the same as the baseline (tests/test_postgres.py); the plain upstream rename's fix from parsed
SQL (tests/patching/test_columns_parsed.py) and its columns from information_schema
(tests/evidence/test_pg_columns.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RENAME = "dbt_upstream_rename_subquery"
ON_POSTGRES = ("dbt_data_null_country", RENAME)


def test_a_fix_and_an_escalation_on_postgres_match_duckdb(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--warehouse", "postgres",
         "--only", ",".join(ON_POSTGRES), "--json", "--results", str(results)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["name"]: row for row in json.loads(proc.stdout)["scenarios"]}
    escalated = rows["dbt_data_null_country"]
    assert (escalated["outcome"], escalated["classification"]) == ("escalated", "data_issue")
    row = rows[RENAME]  # the mart keeps its column: the hidden check sees the good values
    seen = (row["outcome"], row["hidden_check"], row["attempts"])
    assert seen == ("fixed", "match", 1), row["reason"]
    assert row["branch"].startswith("patchit/") and row["passed"]
    assert all(row["untouched"] and row["error"] is None for row in rows.values())
    assert "starting a throw-away PostgreSQL cluster" in proc.stderr
    assert (results / "subset-postgres.json").is_file()
    assert not (results / "subset.json").exists()  # DuckDB's results are left alone

"""The corpus on Postgres (`patchit bench --warehouse postgres`): dbt scenarios through the
real runner on a throw-away PostgreSQL cluster: a fix, an escalation, and the two upstream
renames whose fix needs the warehouse's columns (from information_schema on Postgres). The
full run is `patchit bench --warehouse postgres`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RENAMES = ("dbt_upstream_rename", "dbt_upstream_rename_subquery")
ON_POSTGRES = ("dbt_column_typo", "dbt_data_null_country", *RENAMES)


def test_fixes_and_an_escalation_on_postgres_match_duckdb(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--warehouse", "postgres",
         "--only", ",".join(ON_POSTGRES), "--json", "--results", str(results)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["name"]: row for row in json.loads(proc.stdout)["scenarios"]}
    fixed, escalated = rows["dbt_column_typo"], rows["dbt_data_null_country"]
    assert (fixed["outcome"], fixed["hidden_check"]) == ("fixed", "match"), fixed["reason"]
    assert (escalated["outcome"], escalated["classification"]) == ("escalated", "data_issue")
    for name in RENAMES:  # the mart keeps its column: the hidden check sees the good values
        row = rows[name]
        seen = (row["outcome"], row["hidden_check"], row["attempts"])
        assert seen == ("fixed", "match", 1), row["reason"]
    assert all(row["untouched"] and row["error"] is None for row in rows.values())
    assert "starting a throw-away PostgreSQL cluster" in proc.stderr
    assert (results / "subset-postgres.json").is_file()
    assert not (results / "subset.json").exists()  # DuckDB's results are left alone

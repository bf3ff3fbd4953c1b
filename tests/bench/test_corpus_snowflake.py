"""The corpus on Snowflake (`patchit bench --warehouse snowflake`): dbt scenarios through the
real runner on a throw-away Snowflake emulator (fakesnow) the command starts and stops: a
fix (a ref typo, its branch's hidden check matching the good commit's) and an escalation (a
failing test on bad data), the user's schema's content the same before and after both. The
full run is `patchit bench --warehouse snowflake`.

Run elsewhere, not here again: the column typo and an incremental model's typo healed on
Snowflake end to end (tests/test_snowflake.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ON_SNOWFLAKE = ("dbt_data_null_country", "dbt_ref_typo")


def test_a_fix_and_an_escalation_on_snowflake_match_duckdb(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--warehouse", "snowflake",
         "--only", ",".join(ON_SNOWFLAKE), "--json", "--results", str(results)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["name"]: row for row in json.loads(proc.stdout)["scenarios"]}
    escalated = rows["dbt_data_null_country"]
    assert (escalated["outcome"], escalated["classification"]) == ("escalated", "data_issue")
    row = rows["dbt_ref_typo"]
    seen = (row["outcome"], row["hidden_check"], row["attempts"])
    assert seen == ("fixed", "match", 1), row["reason"]
    assert row["branch"].startswith("patchit/") and row["passed"]
    assert all(row["untouched"] and row["error"] is None for row in rows.values())
    assert "starting a throw-away Snowflake emulator (fakesnow)" in proc.stderr
    assert (results / "subset-snowflake.json").is_file()
    assert not (results / "subset.json").exists()  # DuckDB's results are left alone

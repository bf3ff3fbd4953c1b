"""`patchit bench --warehouse W --only ...` run as a user runs it, and what every warehouse's
sample asserts: the escalation right, the fix verified with the good commit's values on its
branch, the user's relations untouched, W's own results beside (not over) DuckDB's. Used by
tests/bench/test_corpus_postgres.py and test_corpus_snowflake.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ESCALATION = "dbt_data_null_country"  # a failing test on bad data: escalated as data_issue


def assert_fix_and_escalation(
    warehouse: str, fixed: str, starting: str, tmp_path: Path
) -> dict[str, dict[str, Any]]:
    """Run the bench on `warehouse` for `fixed` and the escalation; assert both and return
    the rows by name. `starting` is the line the command prints as it starts the warehouse."""
    results = tmp_path / "results"
    results.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--warehouse", warehouse,
         "--only", f"{ESCALATION},{fixed}", "--json", "--results", str(results)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["name"]: row for row in json.loads(proc.stdout)["scenarios"]}
    escalated = rows[ESCALATION]
    assert (escalated["outcome"], escalated["classification"]) == ("escalated", "data_issue")
    row = rows[fixed]
    seen = (row["outcome"], row["hidden_check"], row["attempts"])
    assert seen == ("fixed", "match", 1), row["reason"]
    assert row["branch"].startswith("patchit/") and row["passed"]
    assert all(row["untouched"] and row["error"] is None for row in rows.values())
    assert starting in proc.stderr
    assert (results / f"subset-{warehouse}.json").is_file()
    assert not (results / "subset.json").exists()  # DuckDB's results are left alone
    return rows

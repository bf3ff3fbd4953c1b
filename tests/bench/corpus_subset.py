"""`patchit bench --only ...` as the CI subsets run it: real dbt, Airflow, git and patchit
subprocesses. The subset is split by file (tests/bench/test_corpus_quick*.py) so that
pytest-xdist's `--dist loadfile` runs its parts on different workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def bench_subset(names: tuple[str, ...], results: Path) -> dict[str, Any]:
    """`patchit bench --only <names> --json --results <results>`: its JSON, with its exit code,
    stderr and results dir under `_exit`, `_stderr` and `_results`."""
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--only", ",".join(names), "--json",
         "--results", str(results)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    data: dict[str, Any] = json.loads(proc.stdout)
    data["_exit"], data["_stderr"], data["_results"] = proc.returncode, proc.stderr, results
    return data


def by_name(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in run["scenarios"]}


def assert_fixed_offline(row: dict[str, Any]) -> None:
    """A code bug fixed by tier 0 alone, its branch reproducing the good commit's values."""
    assert (row["outcome"], row["classification"]) == ("fixed", "code_bug"), row
    assert row["hidden_check"] == "match" and row["branch"].startswith("patchit/")
    assert row["tiers"] == [0] and row["tokens"] == 0  # offline: tier 0 alone
    assert row["passed"] and row["time_to_final_s"] > 0

"""`patchit bench --memory`: the indexed repeat-diff lookup against a full scan, real SQLite."""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

from patchit.bench.perf_memory import fill_memory, unindexed_copy
from patchit.memory import Memory


def test_filled_memory_answers_seen_diff_like_the_scan(tmp_path: Path) -> None:
    path, stored = fill_memory(tmp_path / "home", 20_000)
    assert stored
    with sqlite3.connect(str(path)) as conn:
        assert conn.execute("select count(*) from attempts").fetchone()[0] == 20_000
    scan_path = unindexed_copy(path, tmp_path / "scan")
    with sqlite3.connect(str(scan_path)) as conn:
        indexes = conn.execute(
            "select name from sqlite_master where type = 'index' and tbl_name = 'attempts'"
            " and sql is not null"
        ).fetchall()
    assert indexes == []
    with Memory(path) as indexed, Memory(scan_path) as scan:
        for fingerprint, diff_hash in stored[:5]:
            assert indexed.seen_diff(fingerprint, diff_hash) is True
            assert scan.seen_diff(fingerprint, diff_hash) is True
            assert indexed.seen_diff(fingerprint, "0" * 32) is False
            assert scan.seen_diff(fingerprint, "0" * 32) is False


def test_cli_reports_medians_of_interleaved_runs_and_the_ratio(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", "bench", "--memory", "--attempts", "50000",
         "--runs", "3", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["attempts"] == 50_000 and data["runs"] == 3
    assert len(data["indexed_ms"]) == len(data["scan_ms"]) == 3
    assert data["indexed_median_ms"] == statistics.median(data["indexed_ms"])
    assert data["ratio"] == data["indexed_median_ms"] / data["scan_median_ms"]
    assert "USING INDEX" in data["plan_indexed"] and "SCAN attempts" in data["plan_scan"]
    assert data["ratio"] < 0.5  # an index lookup beats scanning 50,000 rows

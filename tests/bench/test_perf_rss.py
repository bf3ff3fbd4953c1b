"""The warm worker's RSS and the done-when table of `bench --perf` (fast: no dbt; the real
worker's numbers are checked in test_perf.py)."""

from __future__ import annotations

import os

from patchit.bench.perf_rss import (
    done_when,
    format_done_when,
    format_rss_line,
    rss_growth,
    rss_kb,
    tree_rss_kb,
)


def test_rss_is_read_from_proc_for_a_live_process_only() -> None:
    assert (rss_kb(os.getpid()) or 0) > 1000
    assert rss_kb(None) is None
    assert rss_kb(2**22 + 12345) is None  # beyond pid_max: no such process


def test_a_process_trees_rss_holds_its_childrens() -> None:
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; x = b'1' * 50_000_000; time.sleep(30)"]
    )
    try:
        import time

        deadline = time.monotonic() + 20
        while (rss_kb(child.pid) or 0) < 40_000 and time.monotonic() < deadline:
            time.sleep(0.1)
        own = rss_kb(os.getpid()) or 0
        assert (tree_rss_kb(os.getpid()) or 0) >= own + 40_000
    finally:
        child.kill()
        child.wait()


def test_growth_is_the_last_sample_over_the_first() -> None:
    assert rss_growth([100_000]) is None
    assert rss_growth([100_000, 130_000, 105_000]) == 0.05
    assert format_rss_line([102_400, 112_640])[0].endswith("(+10.0%: flat; target within 10%)")
    assert "NOT flat" in format_rss_line([102_400, 122_880])[0]


def test_done_when_holds_each_target_met_missed_or_not_measured() -> None:
    data = {
        "n_models": 2000,
        "median_s": {"warm_verify": 0.8, "fresh_verify": 6.5},
        "heal": {"heal_s": [3.0, 3.3], "select_s": [3.0, 3.0]},  # 1.05x
        "rss_kb": [200_000, 260_000],  # +30%
    }
    rows = {label: value for label, value, _, _ in done_when(data)}
    assert rows["heal / bare select build"] == 1.05
    assert rows["green wrapper / dbt build"] is None
    lines = format_done_when(data)
    assert lines[0].startswith("done when (issue 34), 2000 models:")
    verdicts = [line.rsplit("  ", 1)[1].strip() for line in lines[1:]]
    assert verdicts == ["met", "MISSED", "met", "not measured", "MISSED"]


def test_a_miss_that_rounds_to_its_target_shows_the_digit_that_misses() -> None:
    data = {"heal": {"heal_s": [3.306], "select_s": [3.0]}}  # 1.102x
    row = next(line for line in format_done_when(data) if "heal" in line)
    assert "1.102x" in row and row.endswith("MISSED")

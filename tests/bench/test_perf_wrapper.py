"""The wrapper's lines of `patchit bench --perf`, and its idle tail on a real failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchit.bench.perf import PerfResult, format_report
from patchit.bench.perf_wrapper import format_lines, measure_idle_tail


def test_the_two_lines_carry_medians_ratio_and_targets() -> None:
    green, tail = format_lines([4.0, 3.8, 9.0], [4.1, 3.9, 4.0], [0.05, 0.07])
    match = re.fullmatch(
        r"green wrapper: (\d+\.\d\d) s vs dbt build (\d+\.\d\d) s = (\d+\.\d\d)x "
        r"\(target <= 1\.05x; medians of 3\)",
        green,
    )
    assert match, green
    assert match.groups() == ("4.00", "4.00", "1.00")
    assert tail == "idle tail: report -> exit 0.06 s (target <= 0.2 s)"
    assert format_lines([], [], []) == []


def test_the_cli_start_line_says_whether_its_target_is_met() -> None:
    (line,) = format_lines([], [], [], [0.09, 0.4, 0.1])
    assert line == "cli start: patchit --help 0.10 s (target <= 0.3 s: met; median of 3)"
    (slow,) = format_lines([], [], [], [2.0])
    assert "target <= 0.3 s: NOT met" in slow


def test_the_cli_start_is_timed_in_a_new_process() -> None:
    from patchit.bench.perf_wrapper import measure_cli_start

    seconds = measure_cli_start(2)
    assert len(seconds) == 2 and all(0 < s < 30 for s in seconds)


def test_perf_report_and_json_hold_the_wrapper_measures() -> None:
    result = PerfResult(
        n_models=6, n_tests=3, runs=1, broken_model="int_000", selected_models=2,
        samples_s={m: [1.0] for m in ("full_build", "select_build", "warm_verify",
                                      "fresh_verify")},
        green_dbt_s=[4.0], green_wrapper_s=[4.2], idle_tail_s=[0.1],
    )  # fmt: skip
    lines = format_report(result).splitlines()
    assert lines[-2].startswith("green wrapper: 4.20 s vs dbt build 4.00 s = 1.05x")
    assert lines[-1].startswith("idle tail: report -> exit 0.10 s")
    data = result.to_json()
    assert data["green_wrapper_ratio"] == pytest.approx(1.05)
    assert data["idle_tail_median_s"] == pytest.approx(0.1)


@pytest.mark.slow
def test_a_failure_with_nothing_to_verify_exits_at_once_and_leaves_no_process(
    shop_repo: Path, tmp_path: Path
) -> None:
    # a dropped comma: a syntax error no strategy fixes; the warm dbt worker started in the
    # background while evidence was gathered must be killed, not awaited, and not orphaned
    run = measure_idle_tail(shop_repo, tmp_path / "home", "--select", "orders")
    assert run.exit_code == 1, run.stderr[-3000:]
    assert "failed" in run.stderr
    assert run.leftover == []
    assert run.tail_s is not None and run.tail_s < 2.0  # the bench reports the real figure


def test_a_kept_workdir_s_example_repo_is_made_again(tmp_path: Path) -> None:
    """`bench --perf --workdir` run twice: the wrapper's and the heal's example repos are made
    anew (the second run died on `File exists` before)."""
    from patchit.bench.perf_wrapper import shop_repo
    from patchit.sandbox.git import run_git

    first = shop_repo(tmp_path / "shop")
    (first / "stale.txt").write_text("an earlier bench's\n")
    again = shop_repo(tmp_path / "shop")
    assert not (again / "stale.txt").exists()
    assert run_git(again, "rev-list", "--count", "HEAD").strip() == "1"

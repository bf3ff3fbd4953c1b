"""The heal lines of `patchit bench --perf`: stages from timestamped lines, ratios, targets."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest

from patchit.bench.perf import PerfResult, format_report
from patchit.bench.perf_heal import (
    STAGES,
    HealPerf,
    format_heal_lines,
    run_heal_perf,
    stage_seconds,
)


def test_stages_run_from_each_marked_line_to_the_next() -> None:
    lines = [(0.0, "dbt output\n")]
    lines += [(float(n + 1), f"patchit: {marker} ...\n") for n, (_, marker) in enumerate(STAGES)]
    stages = stage_seconds(lines)
    assert list(stages) == [name for name, _ in STAGES[:-1]]
    assert set(stages.values()) == {1.0}
    assert stage_seconds(lines[:-1]) == {}  # no branch line: the heal did not finish


def test_the_lines_carry_ratios_and_whether_each_target_is_met() -> None:
    perf = HealPerf(
        select_s=[4.0, 4.0, 9.0], heal_s=[5.0, 7.0, 5.5],
        stages_s=[{name: 1.0 for name, _ in STAGES[:-1]}] * 3,
        verify_s=[1.0, 1.0, 1.0], checked_s=[1.2, 1.1, 1.5], sequential_s=[2.0, 2.1, 2.2],
    )  # fmt: skip
    heal, stages, data = format_heal_lines(perf)
    assert re.fullmatch(
        r"heal \(shop\): +dbt exit -> verified branch 5\.50 s vs dbt build --select "
        r"daily_revenue\+ 4\.00 s = 1\.38x \(target <= 1\.5x: met; medians of 3\)",
        heal,
    ), heal
    assert stages.startswith("heal stages: ") and "verify 1.00" in stages
    assert re.fullmatch(
        r"data check: +\+0\.20 s over a 1\.00 s trial \(worktree, warm verify\) = 0\.20x "
        r"\(target <= 0\.3x: met; "
        r"baseline built after the verify: 1\.10x; medians of 3\)",
        data,
    ), data
    slow = HealPerf(**{**asdict(perf), "heal_s": [9.0, 9.0, 9.0], "checked_s": [2.0] * 3})
    assert "NOT met" in format_heal_lines(slow)[0] and "NOT met" in format_heal_lines(slow)[2]
    assert format_heal_lines(HealPerf()) == []


def test_the_perf_report_ends_with_the_heal_lines() -> None:
    result = PerfResult(
        n_models=6, n_tests=3, runs=1, broken_model="int_000", selected_models=2,
        samples_s={m: [1.0] for m in ("full_build", "select_build", "warm_verify",
                                      "fresh_verify")},
        heal=asdict(HealPerf([4.0], [5.0], [{}], [1.0], [1.2], [2.0])),
    )  # fmt: skip
    lines = format_report(result).splitlines()
    assert lines[-3].startswith("heal (shop):") and lines[-1].startswith("data check:")


@pytest.mark.slow
def test_one_heal_run_measures_every_stage_and_the_data_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHIT_HOME", str(tmp_path / "home"))
    perf = run_heal_perf(tmp_path / "work", runs=1)
    assert [len(s) for s in (perf.select_s, perf.heal_s, perf.verify_s, perf.checked_s,
                             perf.sequential_s)] == [1] * 5  # fmt: skip
    assert set(perf.stages_s[0]) == {name for name, _ in STAGES[:-1]}
    assert perf.heal_s[0] == pytest.approx(sum(perf.stages_s[0].values()), abs=0.01)
    assert len(format_heal_lines(perf)) == 3

"""The `bench --perf` report from measured samples, without running dbt: the warm verify is
the median of every candidate of every run, and each run's first is said beside it."""

from __future__ import annotations

from patchit.bench.perf import MEASURES, WARM_PER_RUN, PerfResult, format_report


def _result(warm: list[float]) -> PerfResult:
    runs = len(warm) // WARM_PER_RUN
    samples = {m: [10.0] * runs for m in MEASURES}
    samples["warm_verify"] = warm
    return PerfResult(
        n_models=2000, n_tests=2534, runs=runs, broken_model="int_549", selected_models=9,
        samples_s=samples, warm_first_s=warm[::WARM_PER_RUN],
    )  # fmt: skip


def test_the_warm_verify_is_every_candidate_s_median_and_the_first_is_said() -> None:
    assert WARM_PER_RUN == 3
    # each run's first verify is the slow one; the median of all nine is 0.9 s
    lines = format_report(_result([1.3, 0.8, 0.8, 1.4, 0.8, 0.9, 1.2, 0.9, 0.8])).splitlines()
    warm = next(i for i, line in enumerate(lines) if line.startswith("warm verify:"))
    assert lines[warm].startswith("warm verify:     0.90 s = 0.09x full build (11.1x faster)")
    assert lines[warm].endswith("target >= 20x and <= 1 s: NOT met")  # 11.1x < 20x
    assert lines[warm + 1].strip() == (
        "(median of 9 candidates, 3 a run; the first of each run, right after its builds: 1.30 s)"
    )
    done = next(line for line in lines if line.lstrip().startswith("warm verify  "))
    assert done.split()[-1] == "met"  # 0.90 s <= 1 s


def test_a_result_without_firsts_prints_no_such_line() -> None:
    """A JSON written before the three-a-run measure (one verify a run) reads as before."""
    result = _result([0.5, 0.6, 0.7])
    result.warm_first_s = []
    lines = format_report(result).splitlines()
    warm = next(i for i, line in enumerate(lines) if line.startswith("warm verify:"))
    assert lines[warm + 1].startswith("fresh verify:")

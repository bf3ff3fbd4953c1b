"""The warm dbt worker's memory across candidates, and the issue's done-when table, for
`patchit bench --perf`.

The worker lives for many incidents: a cache that grows with every candidate (a parse kept per
run, a relation list per copy) would end in the out-of-memory killer on a big project. So the
bench verifies `rss_candidates` distinct candidates in a row on one warm worker and reads the
worker's resident set (`VmRSS` of /proc/<pid>/status, with its sandbox's launchers: each run
is a fork, and the parent is what stays) after the first and after the last; flat means
within `RSS_FLAT` of the first.

The done-when table holds the targets of issue 34 against what this run measured: a target
whose measure this run did not take (`--wrapper-runs 0`, `--heal-runs 0`) says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

RSS_FLAT = 0.10  # the last candidate's RSS within 10% of the first's
DONE_WHEN = (  # (label, what is compared, target)
    ("warm verify", "s", 1.0),
    ("fresh verify", "s", 5.0),
    ("heal / bare select build", "x", 1.1),
    ("green wrapper / dbt build", "x", 1.02),
    ("worker RSS growth over the candidates", "%", RSS_FLAT * 100),
)


class _Verifies(Protocol):
    last_breakdown_ms: dict[str, float]

    def verify(self, harness: Any) -> tuple[float, str]: ...


def rss_kb(pid: int | None) -> int | None:
    """A live process's resident set in kB (Linux /proc), None when it cannot be read."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_rss_kb(pid: int | None) -> int | None:
    """`pid`'s resident set and its descendants' (the worker runs under its sandbox's
    launchers: bwrap's processes hold a few MB, the dbt interpreter the rest)."""
    total = rss_kb(pid)
    if pid is None or total is None:
        return None
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                children = [int(c) for c in task.read_text(encoding="ascii").split()]
            except (OSError, ValueError):
                continue
            for child in children:
                total += rss_kb(child) or 0
                todo.append(child)
    return total


def measure_rss(
    bench: _Verifies, harness: Any, candidates: int, say: Callable[[str], None]
) -> tuple[list[int], list[float], list[dict[str, float]]]:
    """The warm worker's RSS (kB) after each of `candidates` distinct verified candidates, and
    each verify's seconds and parts (the warm verify once nothing is read for the first
    time)."""
    samples: list[int] = []
    seconds: list[float] = []
    parts: list[dict[str, float]] = []
    for number in range(1, candidates + 1):
        if number == 1 or number % 10 == 0:
            say(f"worker memory: candidate {number}/{candidates}")
        took, _ = bench.verify(harness)
        seconds.append(round(took, 3))
        parts.append(dict(bench.last_breakdown_ms))
        kb = tree_rss_kb(harness.worker_pid)
        if kb is not None:
            samples.append(kb)
    return samples, seconds, parts


def rss_growth(samples: list[int]) -> float | None:
    """The last sample's growth over the first, as a fraction; None with fewer than two."""
    if len(samples) < 2:
        return None
    return (samples[-1] - samples[0]) / samples[0]


def format_rss_line(samples: list[int], seconds: list[float] | None = None) -> list[str]:
    growth = rss_growth(samples)
    if growth is None:
        return []
    flat = "flat" if abs(growth) <= RSS_FLAT else "NOT flat"
    timed = []
    if seconds:
        timed = [
            f"{'warm, steady:'.ljust(14)}{statistics.median(seconds):7.2f} s median warm verify "
            f"over those {len(seconds)} candidates (min {min(seconds):.2f} s)"
        ]
    rss = (
        f"{'worker RSS:'.ljust(14)}{samples[0] / 1024:7.1f} MB after 1 candidate, "
        f"{samples[-1] / 1024:.1f} MB after {len(samples)} ({growth * 100:+.1f}%: {flat}; "
        f"target within {RSS_FLAT * 100:g}%)"
    )
    return [*timed, rss]


def done_when(data: dict[str, Any]) -> list[tuple[str, float | None, str, float]]:
    """(label, measured or None, unit, target) for each of DONE_WHEN, from `PerfResult.to_json`."""
    medians = data.get("median_s") or {}
    heal = data.get("heal") or {}
    heal_x = None
    if heal.get("heal_s") and heal.get("select_s"):
        heal_x = statistics.median(heal["heal_s"]) / statistics.median(heal["select_s"])
    growth = rss_growth(list(data.get("rss_kb") or []))
    measured = {
        "warm verify": medians.get("warm_verify"),
        "fresh verify": medians.get("fresh_verify"),
        "heal / bare select build": heal_x,
        "green wrapper / dbt build": data.get("green_wrapper_ratio"),
        "worker RSS growth over the candidates": None if growth is None else growth * 100,
    }
    return [(label, measured[label], unit, target) for label, unit, target in DONE_WHEN]


def format_done_when(data: dict[str, Any]) -> list[str]:
    """The done-when table: one row per target, with the measured value and met/MISSED."""
    n_models = data.get("n_models")
    lines = [f"done when (issue 34), {n_models} models:".ljust(46) + "measured    target"]
    for label, value, unit, target in done_when(data):
        if value is None:
            lines.append(f"  {label.ljust(44)}{'-':>8}    {_target(target, unit)}  not measured")
            continue
        met = abs(value) <= target if unit == "%" else value <= target
        shown = unit_text(value, unit)
        if not met and shown == unit_text(target, unit):  # 1.102x is not 1.10x: say so
            shown = unit_text(value, unit, digits=3)
        lines.append(
            f"  {label.ljust(44)}{shown:>8}    {_target(target, unit)}  "
            f"{'met' if met else 'MISSED'}"
        )
    return lines


def _target(target: float, unit: str) -> str:
    return (f"within {target:g}%" if unit == "%" else f"<= {unit_text(target, unit)}").ljust(12)


def unit_text(value: float, unit: str, digits: int = 2) -> str:
    if unit == "s":
        return f"{value:.{digits}f} s"
    if unit == "x":
        return f"{value:.{digits}f}x"
    return f"{value:+.{digits - 1}f}%"

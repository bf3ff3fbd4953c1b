"""Where a warm dbt run's time goes: dbt's own phases, timed inside the worker's fork.

A candidate's verification on a large project cost many times what building its few models
does, and the question "which part grows with the project" is answered by timing dbt's
phases in the run itself, not by guessing from outside. `install()` wraps a handful of dbt's
methods (once, in the worker, beside `tuning`); each run's fork starts with empty clocks
(`reset()`) and its reply carries `phases_ms()`:

    parse          loading the project: the saved parse read and checked, changed files
                   re-parsed, the manifest's flat graph built (`get_full_manifest`)
    read parse     of which: reading the saved parse (`read_manifest_for_partial_parse`)
    write parse    of which: writing the new one back (`write_manifest_for_partial_parse`)
    graph          the dependency graph compiled from the manifest (`compile_manifest`)
    select         the selection resolved into the run's queue (`get_graph_queue`), with
                   the selected tests' edges (added there, not in `graph`: `dbt_tuning`)
    warehouse wait waiting for the harness to place the DuckDB warehouse it cuts while the
                   run starts (`warehouse_gate`; inside whichever phase connects first)
    cache          the adapter's relation cache filled (`populate_adapter_cache`)
    run nodes      the selected models built and tests run (`execute_nodes`)
    artifacts      run_results.json and the run's nodes written

Each phase's time is its own: a phase timed inside another (reading the parse, inside
parsing) is left out of the outer one. What is left of the run (dbt's flags, profile and
project loading, the adapter's registration) is the reply's `duration_ms` minus their sum.
Timing changes nothing a run does.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

PHASES = (
    "parse",
    "read parse",
    "write parse",
    "graph",
    "select",
    "warehouse wait",
    "cache",
    "run nodes",
    "artifacts",
)
# (module, class, method, phase); a method missing from this dbt version is not timed
_TIMED = (
    ("dbt.parser.manifest", "ManifestLoader", "get_full_manifest", "parse"),
    ("dbt.parser.manifest", "ManifestLoader", "read_manifest_for_partial_parse", "read parse"),
    ("dbt.parser.manifest", "ManifestLoader", "write_manifest_for_partial_parse", "write parse"),
    ("dbt.task.base", "ConfiguredTask", "compile_manifest", "graph"),
    ("dbt.task.build", "BuildTask", "compile_manifest", "graph"),  # its own, with test edges
    ("dbt.task.runnable", "GraphRunnableTask", "get_graph_queue", "select"),
    ("dbt.task.build", "BuildTask", "get_graph_queue", "select"),
    ("dbt.task.runnable", "GraphRunnableTask", "populate_adapter_cache", "cache"),
    ("dbt.task.runnable", "GraphRunnableTask", "execute_nodes", "run nodes"),
    ("dbt.artifacts.schemas.run.v5.run", "RunExecutionResult", "write", "artifacts"),
)

_spent: dict[str, float] = {}  # phase -> seconds of its own, this fork's run
_stack: list[list[float]] = []  # per timed call going on: [its start, time of inner phases]


def reset() -> None:
    """At the start of a run (a fork inherits the worker's warm-up clocks)."""
    _spent.clear()
    _stack.clear()


def phases_ms() -> dict[str, float]:
    """Milliseconds of each phase this run went through, rounded to 0.1 ms."""
    return {name: round(_spent[name] * 1000, 1) for name in PHASES if name in _spent}


@contextlib.contextmanager
def timed(phase: str) -> Iterator[None]:
    """Count the time inside as `phase`'s, less the phases timed inside it."""
    frame = [time.perf_counter(), 0.0]
    _stack.append(frame)
    try:
        yield
    finally:
        _stack.pop()
        elapsed = time.perf_counter() - frame[0]
        _spent[phase] = _spent.get(phase, 0.0) + elapsed - frame[1]
        if _stack:
            _stack[-1][1] += elapsed


def _timing(phase: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run_timed(*args: Any, **kwargs: Any) -> Any:
        with timed(phase):
            return method(*args, **kwargs)

    run_timed._patchit_phase = phase  # type: ignore[attr-defined]
    return run_timed


def install() -> None:
    """Wrap dbt's phase methods (once; a second call leaves them)."""
    for module_name, class_name, method_name, phase in _TIMED:
        try:
            owner = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            continue
        raw = owner.__dict__.get(method_name)
        if raw is None:
            continue
        if isinstance(raw, classmethod):
            function = raw.__func__
            if getattr(function, "_patchit_phase", None) is None:
                setattr(owner, method_name, classmethod(_timing(phase, function)))
        elif getattr(raw, "_patchit_phase", None) is None:
            setattr(owner, method_name, _timing(phase, raw))


def breakdown_ms(
    prepared_ms: dict[str, float],
    prepare_ms: float,
    phases: dict[str, float],
    dbt_ms: int | None,
    run_ms: float,
    total_ms: float,
    process: str = "worker: fork and reply",
) -> dict[str, float]:
    """One verification's time, part by part, in the order things happen: patchit's
    preparing (`prepared_ms`: its timed parts, out of `prepare_ms`), dbt's phases and the rest
    of its run (`dbt_ms`: the run's own time; None when the run gave no reply, which is one
    part), the worker's fork and reply (`process`: a fresh process's start, imports and
    reply), and patchit's judging of the outcome; adds up to `total_ms`."""
    parts = {f"patchit: {name}": ms for name, ms in prepared_ms.items()}
    parts["patchit: prepare, other"] = prepare_ms - sum(prepared_ms.values())
    if dbt_ms is None:
        parts["dbt process"] = run_ms
    else:
        parts |= {f"dbt: {name}": ms for name, ms in phases.items()}
        parts["dbt: other"] = dbt_ms - sum(phases.values())
        parts[process] = run_ms - dbt_ms
    parts["patchit: judge"] = total_ms - prepare_ms - run_ms
    return {name: round(max(ms, 0.0), 1) for name, ms in parts.items()}

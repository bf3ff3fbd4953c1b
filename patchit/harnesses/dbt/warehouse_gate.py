"""A candidate's DuckDB warehouse cut while its dbt run starts, not before it.

Cutting the slice of the warehouse a candidate's run reads (`slice`) costs 40 to 70 ms on a
2,000-model project, and dbt does not open the warehouse until it has parsed the project,
linked its graph and selected the run's nodes (some 300 ms of a warm run). So the harness
cuts the slice in a thread of its own (`WarehouseCut`) and sends the run at once; the run's
dbt waits where dbt-duckdb opens a database (`environments.create`, every connection's
start) until the harness says the warehouse is in place. The request names a file
(`GATE_FIELD`), which the harness writes whole once the cut is over: `ready`, or `failed: why`
when it could not place the warehouse (the run then stops at its first connection, and the
harness raises the cut's error after it, as it raised it before the run before).

Nothing of dbt's run changes: it opens the same file, as it was cut; only the time it is cut
moves. A run that never connects (a parse error) never waits. The wait, when there is one, is
the run's `warehouse wait` phase (`phases`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from patchit.harnesses.dbt import phases as dbt_phases
from patchit.harnesses.dbt.tuning_base import replace_once

GATE_FIELD = "warehouse_gate"  # the request's field: the file the run waits for
GATE_FILE = "warehouse.gate"  # in the candidate's scratch dir
READY = "ready"
WAIT_LIMIT_S = 3600.0  # the harness's own timeout stops a run long before this
_POLL_S = 0.0005

T = TypeVar("T")


class WarehouseCut(Generic[T]):
    """`cut()` run in a thread from now on; `gate` written when it ends (see the module)."""

    def __init__(self, gate: Path, cut: Callable[[], T]) -> None:
        self.gate = gate
        self._cut = cut
        self._value: T | None = None
        self._error: BaseException | None = None
        gate.unlink(missing_ok=True)  # an earlier run's, in the same scratch dir
        self._thread = threading.Thread(target=self._run, name="patchit-warehouse-cut")
        self._thread.daemon = True
        self._thread.start()

    def _run(self) -> None:
        text = READY
        try:
            self._value = self._cut()
        except BaseException as exc:  # handed to whoever waits (`result`)
            self._error = exc
            text = f"failed: {type(exc).__name__}: {exc}".splitlines()[0]
        try:
            _write_whole(self.gate, text)
        except OSError as exc:  # the run waits until the harness's timeout stops it
            self._error = self._error or exc

    def result(self) -> T:
        """What the cut returned, once it is over; its error raised again."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def finish(self) -> None:
        """Wait for the cut and drop what it gave (the verification failed before a run)."""
        self._thread.join()


def _write_whole(gate: Path, text: str) -> None:
    """`gate` appears with `text` in it, never part of it (the run reads it when it exists)."""
    partial = gate.with_name(f".{gate.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, gate)
    except OSError:
        partial.unlink(missing_ok=True)
        raise


# -- the run's side (in the worker's fork, or a fresh process) -------------------------------

_armed: list[str] = []  # the gate this run waits for before its first connection


def arm(request: dict[str, Any]) -> None:
    """At the start of a run: the gate its request names, if any."""
    _armed.clear()
    gate = request.get(GATE_FIELD)
    if isinstance(gate, str) and gate:
        _armed.append(gate)


def wait() -> None:
    """Until the armed gate is written: return when it says ready, raise when it does not."""
    if not _armed:
        return
    gate = _armed[0]
    with dbt_phases.timed("warehouse wait"):
        deadline = time.monotonic() + WAIT_LIMIT_S
        while not os.path.exists(gate):
            if time.monotonic() > deadline:
                raise RuntimeError(f"patchit: the sandbox warehouse was not placed ({gate})")
            time.sleep(_POLL_S)
        with open(gate, encoding="utf-8") as handle:
            text = handle.read()
    if text != READY:
        raise RuntimeError(f"patchit: the sandbox warehouse could not be placed: {text}")
    _armed.clear()


def install() -> None:
    """dbt-duckdb's environment (what opens the database) made only once the gate is open;
    nothing without dbt-duckdb."""
    try:
        from dbt.adapters.duckdb import environments
    except ImportError:
        return

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def create(*args: Any, **kwargs: Any) -> Any:
            wait()
            return original(*args, **kwargs)

        return create

    replace_once(environments, "create", make)

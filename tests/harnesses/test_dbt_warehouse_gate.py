"""The warehouse cut beside a run's start (`patchit.harnesses.dbt.warehouse_gate`): the gate
file appears whole once the cut is over, saying ready or why not; a run waits for it at its
first connection, and stops there when the cut failed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from patchit.harnesses.dbt import phases, warehouse_gate
from patchit.harnesses.dbt.warehouse_gate import GATE_FIELD, READY, WarehouseCut


def test_a_cut_opens_the_gate_when_it_is_over_and_hands_back_what_it_placed(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "warehouse.gate"
    gate.write_text(READY)  # an earlier run's: gone before the cut starts
    go = threading.Event()

    def cut() -> tuple[Path | None, str]:
        go.wait(5)
        return tmp_path, "sliced"

    placing = WarehouseCut(gate, cut)
    assert not gate.exists()
    go.set()
    assert placing.result() == (tmp_path, "sliced")
    assert gate.read_text() == READY
    assert [p.name for p in tmp_path.iterdir()] == [gate.name]  # no partial file left


def test_a_failed_cut_says_why_in_the_gate_and_raises_to_whoever_waits(tmp_path: Path) -> None:
    gate = tmp_path / "warehouse.gate"

    def cut() -> tuple[Path | None, str]:
        raise OSError("No space left on device\nsecond line")

    placing = WarehouseCut(gate, cut)
    with pytest.raises(OSError, match="No space left"):
        placing.result()
    assert gate.read_text() == "failed: OSError: No space left on device"
    placing.finish()  # waiting again, without the error, is fine


def test_a_run_waits_for_the_gate_and_times_the_wait(tmp_path: Path) -> None:
    gate = tmp_path / "warehouse.gate"
    warehouse_gate.arm({GATE_FIELD: str(gate)})
    phases.reset()
    opener = threading.Timer(0.3, lambda: gate.write_text(READY))
    opener.start()
    started = time.monotonic()
    warehouse_gate.wait()
    assert time.monotonic() - started >= 0.25
    assert phases.phases_ms()["warehouse wait"] >= 250
    opener.join()
    gate.unlink()
    warehouse_gate.wait()  # open once: the run's next connections do not look again


def test_a_run_stops_at_a_gate_that_says_the_cut_failed(tmp_path: Path) -> None:
    gate = tmp_path / "warehouse.gate"
    gate.write_text("failed: OSError: disk full")
    warehouse_gate.arm({GATE_FIELD: str(gate)})
    with pytest.raises(RuntimeError, match="could not be placed: failed: OSError: disk full"):
        warehouse_gate.wait()


def test_a_run_without_a_gate_never_waits(tmp_path: Path) -> None:
    warehouse_gate.arm({GATE_FIELD: str(tmp_path / "warehouse.gate")})
    warehouse_gate.arm({})  # the next run names none: nothing left armed from the last
    warehouse_gate.wait()
    warehouse_gate.arm({GATE_FIELD: 3})  # not a path
    warehouse_gate.wait()

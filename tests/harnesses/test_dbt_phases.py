"""Where a warm dbt run's time goes (`patchit.harnesses.dbt.phases`): each phase's own time, and one
verification's parts adding up to its total."""

from __future__ import annotations

import time

import pytest

from patchit.harnesses.dbt import phases as dbt_phases


def test_an_inner_phase_is_left_out_of_the_outer_one() -> None:
    dbt_phases.reset()
    with dbt_phases.timed("parse"):
        time.sleep(0.02)
        with dbt_phases.timed("read parse"):
            time.sleep(0.2)
    with dbt_phases.timed("parse"):  # a second call adds up
        time.sleep(0.01)
    spent = dbt_phases.phases_ms()
    assert list(spent) == ["parse", "read parse"]  # in PHASES' order
    # the outer phase's own 30 ms, without the inner 200 ms (with room for a loaded machine)
    assert 30 <= spent["parse"] < 150 and spent["read parse"] >= 200
    dbt_phases.reset()
    assert dbt_phases.phases_ms() == {}


def test_a_phase_that_raises_is_still_timed() -> None:
    dbt_phases.reset()
    with pytest.raises(RuntimeError), dbt_phases.timed("run nodes"):
        raise RuntimeError("a node failed")
    assert "run nodes" in dbt_phases.phases_ms()


def test_a_warm_verification_adds_up_to_its_total() -> None:
    parts = dbt_phases.breakdown_ms(
        {"warehouse copy": 40.0, "selection": 10.0}, prepare_ms=60.0,
        phases={"parse": 300.0, "run nodes": 200.0}, dbt_ms=700, run_ms=750.0, total_ms=815.0,
    )  # fmt: skip
    assert parts == {
        "patchit: warehouse copy": 40.0, "patchit: selection": 10.0,
        "patchit: prepare, other": 10.0, "dbt: parse": 300.0, "dbt: run nodes": 200.0,
        "dbt: other": 200.0, "worker: fork and reply": 50.0, "patchit: judge": 5.0,
    }  # fmt: skip
    assert sum(parts.values()) == 815.0


def test_a_fresh_dbt_process_is_one_part() -> None:
    parts = dbt_phases.breakdown_ms({}, 20.0, {}, None, run_ms=3000.0, total_ms=3030.0)
    assert parts == {"patchit: prepare, other": 20.0, "dbt process": 3000.0,
                     "patchit: judge": 10.0}  # fmt: skip

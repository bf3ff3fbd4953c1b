"""What runs the project, compared with what ran its last good build (no dbt here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.runtime import parse_runtime, runtime_change, runtime_pins
from patchit.memory import Memory
from tests.classify.test_classifier import ORDERS, _evidence

CONTRACT = (
    "Compilation Error in model orders (models/marts/orders.sql)\n"
    "  Contracts are enabled for this model. Please ensure the name, data_type, and "
    "constraints attributes are defined for each column in the model's yaml."
)


def _event(runtime: object) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="shop",
        unit_id="model.shop.orders",
        context={"dbt_runtime": runtime},
    )


@pytest.mark.parametrize(
    ("last_good", "now", "moved"),
    [
        ("dbt=1.11.16 duckdb=1.9.0", "dbt=1.11.16 duckdb=1.11.1", "duckdb 1.9.0 -> 1.11.1"),
        ("dbt=1.10.2 duckdb=1.9.0", "dbt=1.11.16 duckdb=1.11.1",
         "dbt 1.10.2 -> 1.11.16; duckdb 1.9.0 -> 1.11.1"),
        ("dbt=1.11.16 duckdb=1.11.1", "dbt=1.11.16 duckdb=1.11.1", ""),
        ("dbt=1.11.16 postgres=1.9.0", "dbt=1.11.16 duckdb=1.11.1", "adapter postgres -> duckdb"),
        (None, "dbt=1.11.16 duckdb=1.11.1", ""),  # never recorded: unknown, not a change
        ("dbt=1.11.16 duckdb=1.9.0", None, ""),
        ("dbt=1.11.16 duckdb=1.9.0", 7, ""),
        ("garbage", "dbt=1.11.16", ""),
    ],
)  # fmt: skip
def test_what_moved_since_the_last_good_build(
    last_good: str | None, now: object, moved: str
) -> None:
    assert runtime_change(last_good, _event(now)) == moved


def test_parse_and_pins() -> None:
    assert parse_runtime("dbt=1.11.16  duckdb=1.11.1 junk =x y=") == {
        "dbt": "1.11.16",
        "duckdb": "1.11.1",
    }
    assert runtime_pins("dbt 1.10.2 -> 1.11.16; duckdb 1.9.0 -> 1.11.1") == (
        "pip install 'dbt-core==1.10.2' 'dbt-duckdb==1.9.0'"
    )
    assert runtime_pins("") == "the previous versions"


def test_unchanged_code_failing_after_an_upgrade_is_the_environments() -> None:
    evidence = _evidence(CONTRACT)
    assert classify_failure(evidence).cls is FailureClass.CODE_BUG  # as before without a change
    evidence.runtime_change = "duckdb 1.9.0 -> 1.11.1"
    verdict = classify_failure(evidence)
    assert verdict.cls is FailureClass.ENV_MISMATCH and verdict.signature == "runtime_upgraded"
    assert "duckdb 1.9.0 -> 1.11.1" in verdict.reason
    assert any("pip install 'dbt-duckdb==1.9.0'" in a for a in verdict.next_actions)
    # the change touched the failing model: the code is the suspect, upgrade or not
    changed = _evidence(CONTRACT, changed=(ORDERS,))
    changed.runtime_change = "duckdb 1.9.0 -> 1.11.1"
    assert classify_failure(changed).cls is FailureClass.CODE_BUG
    # a data test's failing rows are the data's, whatever ran them
    test = _evidence("Got 3 results, configured to fail if != 0", unit_id="test.shop.nn",
                     status="fail")  # fmt: skip
    test.runtime_change = "duckdb 1.9.0 -> 1.11.1"
    assert classify_failure(test).signature != "runtime_upgraded"


def test_the_memory_keeps_what_ran_the_last_good_build(_patchit_home: Path) -> None:
    with Memory.open(_patchit_home) as memory:
        memory.record_green([], ("shop", "a" * 40), "dbt=1.11.16 duckdb=1.11.1")
        assert memory.last_good("shop") == "a" * 40
        assert memory.last_good_runtime("shop") == "dbt=1.11.16 duckdb=1.11.1"
        memory.record_last_good("shop", "b" * 40)  # an older caller: what ran it is unknown
        assert memory.last_good_runtime("shop") is None
        assert memory.last_good_runtime("other") is None

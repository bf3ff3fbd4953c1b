"""Harnesses are found through the entry-point group, the built-in dbt one included."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Harness
from patchit.harnesses.dbt import DbtHarness
from patchit.harnesses.registry import load_harnesses, select_harness


def test_builtin_dbt_harness_is_an_entry_point() -> None:
    harnesses = load_harnesses()
    dbt = [h for h in harnesses if h.name == "dbt"]
    assert len(dbt) == 1 and isinstance(dbt[0], DbtHarness)
    assert all(isinstance(h, Harness) for h in harnesses)
    assert dbt[0].worker_pid is None  # loading never starts a worker


def test_select_harness_by_inference_and_override(tmp_path: Path) -> None:
    harnesses: list[Harness] = [DbtHarness()]
    dbt_event = UniversalFailureEvent(source="dbt", pipeline_id="shop", unit_id="model.shop.a")
    assert select_harness(dbt_event, tmp_path, harnesses).name == "dbt"
    assert select_harness(dbt_event, tmp_path, harnesses, override="dbt").name == "dbt"
    with pytest.raises(BadInputError, match="'airflow' is not installed"):
        select_harness(dbt_event, tmp_path, harnesses, override="airflow")

    task = UniversalFailureEvent(source="airflow", pipeline_id="etl", unit_id="load")
    with pytest.raises(HarnessError, match="no installed harness"):
        select_harness(task, tmp_path, harnesses)
    (tmp_path / "dbt_project.yml").write_text("name: shop\n")  # a dbt project run by Airflow
    assert select_harness(task, tmp_path, harnesses).name == "dbt"

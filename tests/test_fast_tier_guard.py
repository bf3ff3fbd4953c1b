"""The fast tier's guard knows a slow child by what it runs, wherever patchit's runners of dbt
and Airflow live in the tree (`harnesses/dbt/`, `harnesses/airflow/`, `intake/dbt_child`)."""

from __future__ import annotations

import sys

import pytest

from tests.fast_tier import slow_program


@pytest.mark.parametrize(
    "module",
    [
        "dbt.cli.main",
        "airflow",
        "patchit.harnesses.dbt.worker",
        "patchit.harnesses.airflow.fork",
        "patchit.intake.dbt_child",
    ],
)
def test_a_runner_of_dbt_or_airflow_is_slow(module: str) -> None:
    assert slow_program([sys.executable, "-m", module]) == f"-m {module}"


@pytest.mark.parametrize("module", ["patchit", "patchit.cli", "patchit.bench.fault", "pytest"])
def test_patchit_itself_is_not(module: str) -> None:
    assert slow_program([sys.executable, "-m", module]) is None

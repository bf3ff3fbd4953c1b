"""The heal DAG module builds nothing on import (no Airflow process: DAG objects only)."""

from __future__ import annotations

import sys
import types

import pytest


def test_make_heal_dag_in_a_dag_file_registers_one_dag(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    monkeypatch.delitem(sys.modules, "patchit.integrations.airflow_heal", raising=False)
    monkeypatch.setitem(sys.modules, "user_heal_dag_file", types.ModuleType("user_heal_dag_file"))
    saved = set(DagContext.autoregistered_dags)
    DagContext.autoregistered_dags.clear()
    monkeypatch.setattr(DagContext, "current_autoregister_module_name", "user_heal_dag_file")
    try:  # what Airflow does while parsing `dag = make_heal_dag(max_active_runs=2)`
        from patchit.integrations.airflow_heal import make_heal_dag

        mine = make_heal_dag(max_active_runs=2)
        found = [dag for dag, _mod in DagContext.autoregistered_dags]
    finally:
        DagContext.autoregistered_dags.clear()
        DagContext.autoregistered_dags.update(saved)
    assert len(found) == 1 and found[0] is mine  # not an equal default DAG besides or instead
    assert found[0].max_active_runs == 2


def test_the_default_dag_is_built_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "patchit.integrations.airflow_heal", raising=False)
    import patchit.integrations.airflow_heal as module

    assert "dag" not in vars(module)
    from patchit.integrations.airflow_heal import dag

    assert dag.dag_id == "patchit_heal" and module.dag is dag  # built once
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018

"""The heal DAG module builds nothing on import: Airflow registers every DAG built while it
parses a file, so a file doing `dag = make_heal_dag(...)` must get that one DAG only."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest


class StubDag:
    """Stands in for `airflow.sdk.DAG` (the fast tier imports no Airflow): counts builds."""

    built: list[StubDag] = []

    def __init__(self, **kw: Any) -> None:
        self.dag_id = kw["dag_id"]
        StubDag.built.append(self)

    def __enter__(self) -> StubDag:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None


@pytest.fixture(autouse=True)
def _forget_the_stubbed_module() -> Iterator[None]:
    """The heal module imported over the stubs must not outlive the test: a later test on
    this worker would get its StubDag instead of Airflow's DAG."""
    yield
    sys.modules.pop("patchit.integrations.airflow_heal", None)
    import patchit.integrations as package

    if "airflow_heal" in vars(package):
        delattr(package, "airflow_heal")


def _stub_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = types.ModuleType("airflow.sdk")
    sdk.DAG = StubDag  # type: ignore[attr-defined]
    sdk.task = lambda **_kw: lambda func: lambda: None  # type: ignore[attr-defined]
    sdk.get_current_context = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "airflow", types.ModuleType("airflow"))
    monkeypatch.setitem(sys.modules, "airflow.sdk", sdk)
    monkeypatch.delitem(sys.modules, "patchit.integrations.airflow_heal", raising=False)
    monkeypatch.setattr(StubDag, "built", [])


def test_importing_the_module_builds_no_dag(monkeypatch: pytest.MonkeyPatch) -> None:
    _stub_airflow(monkeypatch)
    from patchit.integrations.airflow_heal import make_heal_dag

    assert StubDag.built == []
    mine = make_heal_dag(max_active_runs=2, pool="patchit")
    assert StubDag.built == [mine]


def test_the_default_dag_is_built_once_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    _stub_airflow(monkeypatch)
    import patchit.integrations.airflow_heal as module

    assert StubDag.built == [] and "dag" not in vars(module)
    from patchit.integrations.airflow_heal import dag

    assert dag.dag_id == "patchit_heal" and module.dag is dag and StubDag.built == [dag]
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


@pytest.mark.slow  # imports Airflow
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

"""LogicalDateStrategy without an Airflow process: the errors are Airflow 3.3.2's own
(`RuntimeTaskInstance` and the context's `DagRun` have no `execution_date`); the rewritten
callable is run against objects shaped like Airflow 3's, which have only `logical_date`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence, TracebackFrame
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.airflow3_dates import LogicalDateStrategy
from tests.patching.contract import StrategyContract

DAY = dt.datetime(2026, 1, 15, tzinfo=dt.UTC)


class RuntimeTaskInstance(SimpleNamespace):
    """What Airflow 3 gives a callable as `ti`: no execution_date, the context on demand."""

    def get_template_context(self) -> dict[str, object]:
        return {"logical_date": DAY}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed = (key, value)


def evidence_for(root: Path, source: str, line: int, cls: str) -> Evidence:
    (root / "dags").mkdir(parents=True, exist_ok=True)
    (root / "dags/d.py").write_text(source)
    message = f"'{cls}' object has no attribute 'execution_date'"
    event = UniversalFailureEvent(
        source=FailureSource.AIRFLOW, pipeline_id="d", unit_id="summarise", unit_path="dags/d.py",
        status="failed", error_type="AttributeError", error_message=message,
        traceback=f"Traceback (most recent call last):\nAttributeError: {message}\n",
        repo_path=str(root),
    )  # fmt: skip
    frame = TracebackFrame(path="dags/d.py", line=line, function="summarise")
    return Evidence(event=event, repo_root=str(root), unit_path="dags/d.py", frames=[frame])


def healed(evidence: Evidence) -> dict[str, object]:
    (candidate,) = LogicalDateStrategy().fix(evidence, [])
    apply_edits(Path(evidence.repo_root), candidate.edits)
    namespace: dict[str, object] = {}
    exec((Path(evidence.repo_root) / "dags/d.py").read_text(), namespace)
    return namespace


TI_SOURCE = """def summarise(ti, **_context: object) -> str:
    day = ti.execution_date.strftime("%Y-%m-%d")
    ti.xcom_push(key="stores", value=3)
    return f"{day}/{ti.execution_date:%d}"
"""


def test_a_task_instance_reads_the_date_from_its_context_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    namespace = healed(evidence_for(tmp_path, TI_SOURCE, 2, "RuntimeTaskInstance"))
    text = (tmp_path / "dags/d.py").read_text()
    assert 'ti.xcom_push(key="stores", value=3)' in text and "execution_date" not in text
    ti = RuntimeTaskInstance()
    summarise = namespace["summarise"]
    assert callable(summarise)
    assert summarise(ti) == "2026-01-15/15" and ti.pushed == ("stores", 3)


def test_untyped_kwargs_are_the_context(tmp_path: Path) -> None:
    source = "def summarise(ti, **context):\n    return ti.execution_date.year\n"
    namespace = healed(evidence_for(tmp_path, source, 2, "RuntimeTaskInstance"))
    assert 'context["logical_date"].year' in (tmp_path / "dags/d.py").read_text()
    summarise = namespace["summarise"]
    assert callable(summarise) and summarise(object(), logical_date=DAY) == 2026


def test_a_dag_run_has_the_logical_date_under_its_new_name(tmp_path: Path) -> None:
    source = 'def summarise(**context):\n    return context["dag_run"].execution_date.day\n'
    namespace = healed(evidence_for(tmp_path, source, 2, "DagRun"))
    summarise = namespace["summarise"]
    assert callable(summarise)
    assert summarise(dag_run=SimpleNamespace(logical_date=DAY)) == 15


@pytest.mark.parametrize("cls", ["Order", "dict"])
def test_another_object_missing_execution_date_is_not_airflows(tmp_path: Path, cls: str) -> None:
    source = "def summarise(order):\n    return order.execution_date\n"
    assert LogicalDateStrategy().fix(evidence_for(tmp_path, source, 2, cls), []) == []


@pytest.fixture
def strategy() -> LogicalDateStrategy:
    return LogicalDateStrategy()


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    return evidence_for(tmp_path / "ti", TI_SOURCE, 2, "RuntimeTaskInstance")


@pytest.fixture
def unrelated_evidence(tmp_path: Path) -> Evidence:
    source = "def summarise(order):\n    return order.execution_date\n"
    return evidence_for(tmp_path / "order", source, 2, "Order")


class TestLogicalDateContract(StrategyContract):
    pass

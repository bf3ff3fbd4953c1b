"""Airflow3UpgradeStrategy's rules without an Airflow process: the error texts are Airflow
3.3.2's own (copied from the real runs in test_airflow3.py), ruff runs for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence, TracebackFrame
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.airflow3 import Airflow3UpgradeStrategy, ruff_binary

PROVIDE_CONTEXT_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/venv/site-packages/airflow/sdk/bases/operator.py", line 1121, in __init__\n'
    "    raise TypeError(\n"
    "TypeError: Invalid arguments were passed to PythonOperator (task_id: f). "
    "Invalid arguments were:\n**kwargs: {'provide_context': True}\n"
)


def evidence_for(
    root: Path, source: str, error_type: str, message: str, line: int | None = None,
    traceback: str | None = None,
) -> Evidence:  # fmt: skip
    (root / "dags").mkdir(parents=True, exist_ok=True)
    (root / "dags/d.py").write_text(source)
    event = UniversalFailureEvent(
        source="airflow", pipeline_id="d", unit_id="dags/d.py", unit_path="dags/d.py",
        status="import_error", error_type=error_type, error_message=message,
        traceback=traceback, repo_path=str(root),
    )  # fmt: skip
    frames = [TracebackFrame(path="dags/d.py", line=line, function="<module>")] if line else []
    return Evidence(event=event, repo_root=str(root), unit_path="dags/d.py", frames=frames)


def fixed(evidence: Evidence) -> str:
    (candidate,) = Airflow3UpgradeStrategy().fix(evidence, [])
    apply_edits(Path(evidence.repo_root), candidate.edits)
    return (Path(evidence.repo_root) / "dags/d.py").read_text()


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("Op(task_id='a', provide_context=True)", "Op(task_id='a')"),
        ("Op(provide_context=True, task_id='a')", "Op(task_id='a')"),
        ("Op(provide_context=True)", "Op()"),
        ("Op(\n    task_id='a',\n    provide_context=True,  # old\n)", "Op(\n    task_id='a',\n)"),
    ],
    ids=["last", "first", "only", "own-line"],
)
def test_provide_context_is_removed_with_its_comma(
    tmp_path: Path, call: str, expected: str
) -> None:
    source = f"from ops import Op\n\n{call}\n"
    evidence = evidence_for(
        tmp_path, source, "ImportError", "**kwargs: {'provide_context': True}",
        traceback=PROVIDE_CONTEXT_TRACE.replace("PythonOperator", "Op"),
    )  # fmt: skip
    assert fixed(evidence) == f"from ops import Op\n\n{expected}\n"


def test_provide_context_of_another_operator_is_left_alone(tmp_path: Path) -> None:
    source = "from ops import Op\n\nOp(task_id='a', provide_context=True)\n"
    message = "**kwargs: {'provide_context': True}"
    evidence = evidence_for(tmp_path, source, "ImportError", message, None, PROVIDE_CONTEXT_TRACE)
    assert Airflow3UpgradeStrategy().fix(evidence, []) == []  # the error names PythonOperator


def test_ruff_is_installed_with_patchit() -> None:
    # in the `airflow` and `dev` extras: a missing ruff is an install defect, not a skip
    assert ruff_binary() is not None


def test_only_the_ruff_fix_the_error_names_is_taken(tmp_path: Path) -> None:
    source = (
        "from airflow import DAG\n"
        "from airflow.operators.dummy import DummyOperator\n\n"
        'with DAG(dag_id="x", schedule_interval="@daily"):\n'
        '    DummyOperator(task_id="s")\n'
    )
    message = "DAG.__init__() got an unexpected keyword argument 'schedule_interval'"
    text = fixed(evidence_for(tmp_path, source, "TypeError", message, line=4))
    assert text == source.replace("schedule_interval=", "schedule=")


def test_an_import_still_used_after_ruffs_fix_is_no_candidate(tmp_path: Path) -> None:
    source = (
        "from airflow.operators.dummy import DummyOperator, chain_markers\n\n"
        'DummyOperator(task_id="s")\n'
        "chain_markers()\n"  # ruff knows no new home for it: the import would still fail
    )
    message = "No module named 'airflow.operators.dummy'"
    evidence = evidence_for(tmp_path, source, "ModuleNotFoundError", message, line=1)
    assert Airflow3UpgradeStrategy().fix(evidence, []) == []


def test_days_ago_kept_beside_other_names_and_an_existing_pendulum(tmp_path: Path) -> None:
    source = (
        "import pendulum\n"
        "from airflow.utils.dates import days_ago, cron_presets\n\n"
        "START = days_ago(n)\n"
    )
    message = (
        "cannot import name 'days_ago' from 'airflow.utils.dates' (/venv/airflow/utils/dates.py)"
    )
    text = fixed(evidence_for(tmp_path, source, "ImportError", message, line=2))
    assert text == (
        "import pendulum\n"
        "from airflow.utils.dates import cron_presets\n\n"
        'START = pendulum.today("UTC").add(days=-(n))\n'
    )


def test_days_ago_inside_an_f_string_takes_the_other_quotes(tmp_path: Path) -> None:
    source = 'from airflow.utils.dates import days_ago\n\nprint(f"since {days_ago(7):%Y-%m-%d}")\n'
    message = (
        "cannot import name 'days_ago' from 'airflow.utils.dates' (/venv/airflow/utils/dates.py)"
    )
    text = fixed(evidence_for(tmp_path, source, "ImportError", message, line=1))
    assert (
        text
        == "import pendulum\n\nprint(f\"since {pendulum.today('UTC').add(days=-7):%Y-%m-%d}\")\n"
    )

"""Airflow3UpgradeStrategy on real Airflow 3 failures: task-context habits from a real
`airflow dags test` run, and broken DAG files imported by real Python with Airflow 3.3.2."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.intake.airflow_scan import import_error_events
from patchit.patching.apply import apply_edits
from patchit.patching.base import PatchCandidate, Strategy
from patchit.patching.fixits.airflow3 import Airflow3UpgradeStrategy
from tests.evidence.airflow3_failures import HABITS_DAG
from tests.evidence.airflow_failures import Zoo, init_repo, run_script, script_failure
from tests.patching.contract import StrategyContract

pytestmark = pytest.mark.slow


class TestAirflow3UpgradeContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return Airflow3UpgradeStrategy()

    @pytest.fixture
    def evidence(self, habits: Zoo) -> Evidence:
        return habits.evidence("stamp")  # KeyError: 'execution_date'

    @pytest.fixture
    def unrelated_evidence(self, zoo: Zoo) -> Evidence:
        return zoo.evidence("load_order")  # KeyError: 'amout', a record key


def fix(evidence: Evidence) -> PatchCandidate:
    (candidate,) = Airflow3UpgradeStrategy().fix(evidence, [])
    return candidate


def fixed_text(repo: Path, rel: str, candidate: PatchCandidate) -> str:
    apply_edits(repo, candidate.edits)
    return (repo / rel).read_text()


# -- failed tasks: the context of Airflow 3.3.2 ---------------------------------------------


def test_execution_date_is_read_as_logical_date(habits: Zoo, tmp_path: Path) -> None:
    event = habits.events["stamp"]
    assert (event.error_type, event.error_message) == ("KeyError", "'execution_date'")
    repo = habits.copy_repo(tmp_path / "repo")
    text = fixed_text(repo, HABITS_DAG, fix(habits.evidence("stamp", repo)))
    assert 'day = context["logical_date"].strftime("%Y-%m-%d")' in text
    assert '"at": context["logical_date"].isoformat()' in text  # every read, one fix
    assert "execution_date" not in text


def test_yesterday_and_tomorrow_are_derived_from_logical_date(habits: Zoo, tmp_path: Path) -> None:
    assert habits.events["window"].error_message == "'yesterday_ds'"
    repo = habits.copy_repo(tmp_path / "repo")
    text = fixed_text(repo, HABITS_DAG, fix(habits.evidence("window", repo)))
    assert (
        "return f\"{context['logical_date'].subtract(days=1).strftime('%Y-%m-%d')}.."
        "{context['logical_date'].add(days=1).strftime('%Y%m%d')}\""
    ) in text  # the key's own quotes: inside an f-string the other kind would not parse


def test_ti_operator_becomes_the_task_type(habits: Zoo, tmp_path: Path) -> None:
    event = habits.events["operator_name"]
    assert "'RuntimeTaskInstance' object has no attribute 'operator'" in event.error_message
    repo = habits.copy_repo(tmp_path / "repo")
    text = fixed_text(repo, HABITS_DAG, fix(habits.evidence("operator_name", repo)))
    assert 'return f"{ti.task_id} ran as {ti.task.task_type}"' in text


def test_prev_ds_has_no_airflow3_equivalent_so_no_guess(habits: Zoo) -> None:
    assert habits.events["previous"].error_message == "'prev_ds'"
    assert Airflow3UpgradeStrategy().fix(habits.evidence("previous"), []) == []


# -- broken DAG files: real imports under Airflow 3.3.2 -------------------------------------

SCHEDULE_INTERVAL = """\
from datetime import datetime

from airflow import DAG

with DAG(
    dag_id="daily",
    schedule_interval="@daily",
    start_date=datetime(2024, 1, 1),
):
    pass
"""

DUMMY = """\
from datetime import datetime

from airflow.operators.dummy import DummyOperator
from airflow.sdk import DAG

with DAG(dag_id="marker", schedule=None, start_date=datetime(2024, 1, 1)):
    start = DummyOperator(task_id="start")
"""

DAYS_AGO = """\
from airflow.sdk import DAG
from airflow.utils.dates import days_ago

with DAG(dag_id="recent", schedule=None, start_date=days_ago(2)):
    pass
"""

DAYS_AGO_HOUR = DAYS_AGO.replace("days_ago(2)", "days_ago(2, hour=6)")

PROVIDE_CONTEXT = """\
from datetime import datetime

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG


def report(**context):
    return context["ds"]


with DAG(dag_id="reports", schedule=None, start_date=datetime(2024, 1, 1)):
    PythonOperator(task_id="report", python_callable=report, provide_context=True)
    PythonOperator(
        task_id="report_again",
        provide_context=True,
        python_callable=report,
    )
"""


def scan_evidence(tmp_path: Path, source: str) -> tuple[Path, Evidence]:
    """The DAG file's real import error (Python with Airflow 3.3.2), as `patchit airflow scan`
    spools it."""
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "dags/pipeline.py", source, "pipeline")
    (event,) = import_error_events({str(repo / "dags/pipeline.py"): event.traceback or ""},
                                   repo / "dags")  # fmt: skip
    return repo, gather_airflow_evidence(event, repo)


def test_schedule_interval_takes_only_ruffs_related_fix(tmp_path: Path) -> None:
    repo, evidence = scan_evidence(tmp_path, SCHEDULE_INTERVAL)
    assert "unexpected keyword argument 'schedule_interval'" in evidence.event.error_message
    candidate = fix(evidence)
    assert [(e.search, e.replace) for e in candidate.edits] == [
        ('    schedule_interval="@daily",\n', '    schedule="@daily",\n')
    ]  # ruff would also move `from airflow import DAG` (AIR311): unrelated, left alone
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "dags/pipeline.py").returncode == 0


def test_dummy_operator_moves_to_the_standard_providers_empty_operator(tmp_path: Path) -> None:
    repo, evidence = scan_evidence(tmp_path, DUMMY)
    assert evidence.event.error_message == "No module named 'airflow.operators.dummy'"
    text = fixed_text(repo, "dags/pipeline.py", fix(evidence))
    assert "airflow.operators.dummy" not in text
    assert "from airflow.providers.standard.operators.empty import EmptyOperator\n" in text
    assert 'start = EmptyOperator(task_id="start")' in text
    assert run_script(repo, "dags/pipeline.py").returncode == 0


def test_days_ago_becomes_midnight_utc_n_days_ago(tmp_path: Path) -> None:
    repo, evidence = scan_evidence(tmp_path, DAYS_AGO)
    assert (
        "cannot import name 'days_ago' from 'airflow.utils.dates'" in evidence.event.error_message
    )
    text = fixed_text(repo, "dags/pipeline.py", fix(evidence))
    assert text == DAYS_AGO.replace(
        "from airflow.utils.dates import days_ago", "import pendulum"
    ).replace("days_ago(2)", 'pendulum.today("UTC").add(days=-2)')
    assert run_script(repo, "dags/pipeline.py").returncode == 0


def test_days_ago_with_an_hour_is_not_guessed(tmp_path: Path) -> None:
    _repo, evidence = scan_evidence(tmp_path, DAYS_AGO_HOUR)
    assert Airflow3UpgradeStrategy().fix(evidence, []) == []


def test_provide_context_is_dropped_from_every_call(tmp_path: Path) -> None:
    repo, evidence = scan_evidence(tmp_path, PROVIDE_CONTEXT)
    assert "Invalid arguments were passed to PythonOperator" in (evidence.event.traceback or "")
    text = fixed_text(repo, "dags/pipeline.py", fix(evidence))
    assert "provide_context" not in text
    assert 'PythonOperator(task_id="report", python_callable=report)\n' in text
    assert '        task_id="report_again",\n        python_callable=report,\n' in text
    assert run_script(repo, "dags/pipeline.py").returncode == 0


def test_an_unrelated_import_error_gets_no_ruff_fix(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """\
        from airflow import DAG
        from zoo_vendor_sdk import client

        DAG(dag_id="x", schedule_interval="@daily")
        """
    )
    _repo, evidence = scan_evidence(tmp_path, source)
    assert evidence.event.error_message == "No module named 'zoo_vendor_sdk'"
    assert Airflow3UpgradeStrategy().fix(evidence, []) == []

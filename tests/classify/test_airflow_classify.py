"""Classifier verdicts on real Airflow 3 task failures (the zoo DAG) and real import errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchit.classify.airflow_signatures import AIRFLOW_SIGNATURES
from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.intake.airflow_scan import import_error_events
from tests.conftest import commit_all
from tests.evidence.airflow_failures import Zoo

pytestmark = pytest.mark.slow

C = FailureClass


@pytest.mark.parametrize(
    ("task_id", "cls", "signature"),
    [
        ("load_order", C.CODE_BUG, "python_error_in_repo"),
        ("total_amount", C.CODE_BUG, "python_error_in_repo"),
        ("summarise", C.CODE_BUG, "python_error_in_repo"),
        ("import_late", C.CODE_BUG, "python_error_in_repo"),
        ("export_rows", C.CODE_BUG, "python_error_in_repo"),
        ("write_daily", C.CODE_BUG, "output_dir_missing"),
        ("read_input", C.ENV_MISMATCH, "input_file_missing"),
        ("env_config", C.ENV_MISMATCH, "airflow_missing_env_var"),
        ("warehouse_conn", C.ENV_MISMATCH, "airflow_missing_connection"),
        ("threshold", C.ENV_MISMATCH, "airflow_missing_variable"),
        ("missing_package", C.DEPENDENCY_ISSUE, "python_package_missing"),
        ("refused", C.INFRA_ISSUE, "connection_failed"),
        ("api_503", C.INFRA_ISSUE, "http_server_error"),
        ("api_401", C.INFRA_ISSUE, "http_auth_rejected"),
        ("slow_query", C.INFRA_ISSUE, "airflow_task_timeout"),
    ],
)
def test_real_task_failures_get_their_class(
    zoo: Zoo, task_id: str, cls: FailureClass, signature: str
) -> None:
    verdict = classify_failure(zoo.evidence(task_id))
    assert (verdict.cls, verdict.signature) == (cls, signature), verdict.reason


def test_names_in_reasons_come_from_the_error(zoo: Zoo) -> None:
    assert "'zoo_threshold'" in classify_failure(zoo.evidence("threshold")).reason
    assert "'zoo_warehouse'" in classify_failure(zoo.evidence("warehouse_conn")).reason
    verdict = classify_failure(zoo.evidence("env_config"))
    assert "'ZOO_API_URL'" in verdict.reason
    assert any("airflow tasks test zoo" in a for a in classify_failure(
        zoo.evidence("slow_query")).next_actions)  # fmt: skip


def test_explicit_data_check_is_data_issue_unless_the_check_changed(zoo: Zoo) -> None:
    head = zoo.events["check_amounts"].commit
    assert head is not None
    unchanged = classify_failure(zoo.evidence("check_amounts", last_good_commit=head))
    assert (unchanged.cls, unchanged.signature) == (C.DATA_ISSUE, "data_check_failed")
    changed = classify_failure(zoo.evidence("check_amounts"))  # vs HEAD~1: the file is new
    assert (changed.cls, changed.signature) == (C.CODE_BUG, "data_check_code_changed")


def _import_error(repo: Path, source: str, python_path: Path) -> UniversalFailureEvent:
    """A real import of a DAG file that fails, turned into an event by the scan intake."""
    dag = repo / "dags" / "broken.py"
    dag.write_text(source)
    commit_all(repo, "broken dag")
    proc = subprocess.run(  # -P: only PYTHONPATH decides what is importable, as in Airflow
        [sys.executable, "-P", str(dag)],
        capture_output=True, text=True, env={"PYTHONPATH": str(python_path)}, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    (event,) = import_error_events({str(dag): proc.stderr}, repo / "dags")
    return event


@pytest.mark.parametrize(
    ("source", "on_path", "cls", "signature"),
    [
        ("from zoo_lib.helper import write_rows\n", True, C.CODE_BUG, "airflow_module_typo"),
        ("from zoo_lib.helpers import write_rows\n", False, C.ENV_MISMATCH,
         "airflow_module_not_on_path"),
        ("import zoo_vendor_sdk\n", True, C.DEPENDENCY_ISSUE, "python_package_missing"),
        ("import airflow.providers.zoo_cloud.hooks\n", True, C.DEPENDENCY_ISSUE,
         "airflow_provider_missing"),
        ("from zoo_lib.helpers import summarise_order\n", True, C.CODE_BUG, "dag_import_error"),
        ("x = {'a': 1}\nprint(x['b'])\n", True, C.CODE_BUG, "dag_import_error"),
    ],
)  # fmt: skip
def test_broken_dag_files_get_their_class(
    zoo: Zoo, tmp_path: Path, source: str, on_path: bool, cls: FailureClass, signature: str
) -> None:
    repo = zoo.copy_repo(tmp_path / "repo")
    event = _import_error(repo, source, repo / "dags" if on_path else tmp_path)
    verdict = classify_failure(gather_airflow_evidence(event, repo))
    assert (verdict.cls, verdict.signature) == (cls, signature), verdict.reason


def test_signature_names_are_unique_and_narrow_come_first() -> None:
    names = [s.name for s in AIRFLOW_SIGNATURES]
    assert len(names) == len(set(names))
    assert names.index("airflow_missing_env_var") < names.index("python_error_in_repo")
    assert names.index("output_dir_missing") < names.index("input_file_missing")
    assert names[-1] == "python_error_in_repo"

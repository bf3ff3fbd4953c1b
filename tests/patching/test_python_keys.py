"""RenameKeyStrategy on a real Airflow KeyError, and the cases where it must not guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.python_keys import RenameKeyStrategy
from tests.evidence.airflow_failures import (
    ZOO_DAG,
    Zoo,
    init_repo,
    run_script,
    script_failure,
)
from tests.patching.contract import StrategyContract

pytestmark = pytest.mark.slow


@pytest.fixture
def strategy() -> Strategy:
    return RenameKeyStrategy()


@pytest.fixture
def evidence(zoo: Zoo) -> Evidence:
    return zoo.evidence("load_order")


@pytest.fixture
def unrelated_evidence(zoo: Zoo) -> Evidence:
    """KeyError on os.environ['ZOO_API_URL'] while ENDPOINTS has the near key 'ZOO_API_URI'."""
    return zoo.evidence("env_config")


class TestRenameKeyContract(StrategyContract):
    pass


def test_the_misspelt_key_becomes_the_upstream_key(evidence: Evidence) -> None:
    (candidate,) = RenameKeyStrategy().fix(evidence, [])
    (edit,) = candidate.edits
    assert (edit.path, edit.search, edit.replace) == (
        ZOO_DAG,
        '        return row["amout"] * 100\n',
        '        return row["amount"] * 100\n',
    )
    assert candidate.tag == "rename_key" and "'amount'" in candidate.rationale
    # the XCom the task pulled, as the callback recorded it in the task process
    assert "the run's row (keys recorded at run time)" in candidate.rationale


def test_environment_keys_are_configuration_never_renamed(unrelated_evidence: Evidence) -> None:
    assert "ZOO_API_URI" in (unrelated_evidence.raw_code or "")  # a near key was there
    assert unrelated_evidence.frames[-1].code == 'return os.environ["ZOO_API_URL"]'
    assert RenameKeyStrategy().fix(unrelated_evidence, []) == []


def test_two_equally_near_keys_is_a_tie_and_no_guess(zoo: Zoo, tmp_path: Path) -> None:
    repo = zoo.copy_repo(tmp_path / "repo")
    dag = repo / ZOO_DAG
    dag.write_text(
        dag.read_text().replace("ENDPOINTS = {", 'TOTALS = {"amouts": 1}\nENDPOINTS = {')
    )
    assert RenameKeyStrategy().fix(zoo.evidence("load_order", repo=repo), []) == []


def test_no_key_near_enough_is_no_guess(zoo: Zoo, tmp_path: Path) -> None:
    repo = zoo.copy_repo(tmp_path / "repo")
    for path in (repo / "dags").rglob("*.py"):
        path.write_text(path.read_text().replace('"amount"', '"price_cents"'))
    # the code alone: the run's own row (runtime evidence) still had `amount`
    event = zoo.events["load_order"].model_copy(update={"runtime_locals": None})
    assert RenameKeyStrategy().fix(gather_airflow_evidence(event, repo), []) == []


LOCALS_JOB = """import sys
import traceback

def handle(record):
    return record["custmer"]

try:
    handle({"customer": "ada", "order_id": 1})
except KeyError as exc:
    report = traceback.TracebackException.from_exception(exc, capture_locals=True)
    sys.stderr.write("".join(report.format()))
    raise SystemExit(1)
"""


def test_keys_come_from_captured_locals_and_the_fix_runs(tmp_path: Path) -> None:
    """A traceback with locals names the dict's real keys; applying the edit makes it pass."""
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/locals_job.py", LOCALS_JOB, "handle")
    evidence = gather_airflow_evidence(event, repo)
    assert evidence.frames[-1].locals["record"] == "{'customer': 'ada', 'order_id': 1}"
    (candidate,) = RenameKeyStrategy().fix(evidence, [])
    assert "captured locals" in candidate.rationale
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "jobs/locals_job.py").returncode == 0

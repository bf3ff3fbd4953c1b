"""FixCallStrategy on a real Airflow TypeError from a repo helper whose parameter was renamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.python_calls import FixCallStrategy
from tests.evidence.airflow_failures import (
    Zoo,
    init_repo,
    run_script,
    script_failure,
)
from tests.patching.contract import StrategyContract

pytestmark = pytest.mark.slow


@pytest.fixture
def strategy() -> Strategy:
    return FixCallStrategy()


@pytest.fixture
def evidence(zoo: Zoo) -> Evidence:
    return zoo.evidence("export_rows")  # write_rows() got an unexpected keyword 'rowz'


@pytest.fixture
def unrelated_evidence(zoo: Zoo) -> Evidence:
    return zoo.evidence("load_order")


class TestFixCallContract(StrategyContract):
    pass


def test_unexpected_keyword_becomes_the_parameter(evidence: Evidence) -> None:
    (candidate,) = FixCallStrategy().fix(evidence, [])
    assert candidate.edits[0].replace == (
        '        return helpers.write_rows(f"{OUT_DIR}/export.csv", rows=[ORDER])\n'
    )
    assert "(path, rows, delimiter)" in candidate.rationale


MISSING_JOB = """def load(path, **options):
    return path, options


def run():
    return load(pth="/tmp/x", limit=3)


print(run())
"""

TIE_JOB = """def load(path_a, path_b):
    return path_a + path_b


load(path="y")  # path_a and path_b are equally near
"""

BUILTIN_JOB = """import json


def run():
    return json.dumps({}, indnt=2)


run()
"""


def test_missing_argument_passed_under_a_near_name_is_fixed_and_runs(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/load.py", MISSING_JOB, "run")
    assert "missing 1 required positional argument: 'path'" in event.error_message
    (candidate,) = FixCallStrategy().fix(gather_airflow_evidence(event, repo), [])
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "jobs/load.py").returncode == 0


@pytest.mark.parametrize("source", [TIE_JOB, BUILTIN_JOB], ids=["tie", "not-a-repo-function"])
def test_no_guess_on_a_tie_or_a_function_outside_the_repo(tmp_path: Path, source: str) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/job.py", source, "run")
    assert event.error_type == "TypeError"
    assert FixCallStrategy().fix(gather_airflow_evidence(event, repo), []) == []

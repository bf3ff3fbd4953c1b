"""CreateDirStrategy on a real Airflow write into a missing directory; reads are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.python_dirs import CreateDirStrategy
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
    return CreateDirStrategy()


@pytest.fixture
def evidence(zoo: Zoo) -> Evidence:
    return zoo.evidence("write_daily")


@pytest.fixture
def unrelated_evidence(zoo: Zoo) -> Evidence:
    """The same FileNotFoundError, but on a read of a missing input: not the code's to fix."""
    return zoo.evidence("read_input")


class TestCreateDirContract(StrategyContract):
    pass


def test_makedirs_is_inserted_before_the_write_in_os_style(evidence: Evidence) -> None:
    (candidate,) = CreateDirStrategy().fix(evidence, [])
    (edit,) = candidate.edits
    assert edit.path == ZOO_DAG
    assert edit.replace == edit.search.replace(
        '        with open(path, "w") as handle:\n',
        "        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        '        with open(path, "w") as handle:\n',
    )


PATHLIB_JOB = '''"""Writes a report with pathlib."""
import sys
from pathlib import Path

OUT = Path(sys.argv[0]).resolve().parent / "out"


def publish(day: str) -> Path:
    target = OUT / "reports" / day / "summary.txt"
    target.write_text("ok\\n")
    return target


publish("2024-03-01")
'''

OPEN_NO_IMPORT_JOB = '''"""Writes with open() and imports nothing."""


def publish(base):
    with open(base + "/nested/dir/out.csv", "a") as handle:
        handle.write("a,b\\n")


publish(__file__.rsplit("/", 1)[0])
'''


@pytest.mark.parametrize(
    ("source", "inserted"),
    [
        (PATHLIB_JOB, "    target.parent.mkdir(parents=True, exist_ok=True)\n"),
        (OPEN_NO_IMPORT_JOB,
         '    os.makedirs(os.path.dirname(base + "/nested/dir/out.csv"), exist_ok=True)\n'),
    ],
)  # fmt: skip
def test_the_inserted_line_matches_the_file_and_the_job_then_runs(
    tmp_path: Path, source: str, inserted: str
) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/job.py", source, "publish")
    assert event.error_type == "FileNotFoundError"
    (candidate,) = CreateDirStrategy().fix(gather_airflow_evidence(event, repo), [])
    assert inserted in candidate.edits[0].replace
    apply_edits(repo, candidate.edits)
    if inserted.lstrip().startswith("os."):  # the file imported nothing: os is added
        assert "import os\n" in (repo / "jobs/job.py").read_text()
    assert run_script(repo, "jobs/job.py").returncode == 0

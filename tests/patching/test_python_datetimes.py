"""NaiveAwareStrategy on real Python tracebacks (a job run by the interpreter, no Airflow): the
naive side becomes aware as UTC and the job then runs; a side that may be aware is left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.python_datetimes import NaiveAwareStrategy
from tests.evidence.airflow_failures import init_repo, run_script, script_failure
from tests.patching.contract import StrategyContract

JOB = "jobs/job.py"
FUTURE = '''"""Refuses invoices dated in the future."""
from datetime import datetime, timezone

INVOICES = [{"id": 1, "issued_on": "2024-03-01"}]


def validate(invoices):
    for invoice in invoices:
        if datetime.fromisoformat(invoice["issued_on"]) > datetime.now(timezone.utc):
            raise ValueError("dated in the future")


validate(INVOICES)
'''
AGE = '''"""How old the last load is."""
from datetime import datetime
import os

LOADED = datetime.fromisoformat("2024-03-01T06:00:00+00:00")


def age_hours(loaded):
    return (datetime.utcnow() - loaded).total_seconds() / 3600


print(round(age_hours(LOADED)) > 0)
'''
MODULE_FORM = '''"""Compares a built date with an aware one, the module imported whole."""
import datetime

CUTOFF = datetime.datetime(2024, 3, 1, tzinfo=datetime.timezone.utc)


def late(day):
    return datetime.datetime(day.year, day.month, day.day) >= CUTOFF


print(late(datetime.date(2024, 3, 2)))
'''
UNKNOWN = '''"""The parsed side has an offset (aware); the naive one is a variable."""
from datetime import datetime

STAMP = "2024-03-01T06:00:00+00:00"
LIMIT = datetime(2024, 3, 2)


def check(limit):
    return datetime.fromisoformat(STAMP) < limit


check(LIMIT)
'''


SHADOWED = AGE.replace("import os\n", "from airflow_like import timezone  # not datetime's\n")
EQUALITY = '''"""An equality never raises: the ordering beside it did, and only it changes."""
from datetime import datetime, timezone

NOW = datetime.now(timezone.utc)


def stale(day):
    return day == datetime(2024, 1, 1) or day < datetime(2024, 3, 1)


stale(NOW)
'''


def _evidence(tmp_path: Path, source: str) -> tuple[Path, Evidence]:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, JOB, source, "job")
    assert event.error_type == "TypeError", event.error_message
    return repo, gather_airflow_evidence(event, repo)


@pytest.fixture
def strategy() -> Strategy:
    return NaiveAwareStrategy()


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    return _evidence(tmp_path, FUTURE)[1]


@pytest.fixture
def unrelated_evidence(tmp_path: Path) -> Evidence:
    """A TypeError of another kind: not a datetime's."""
    repo = init_repo(tmp_path / "other")
    event = script_failure(repo, JOB, "print(1 + '1')\n", "job")
    return gather_airflow_evidence(event, repo)


class TestNaiveAwareContract(StrategyContract):
    pass


@pytest.mark.parametrize(
    ("source", "changed", "import_line"),
    [
        # a parsed text may carry an offset in other rows: compared in naive UTC, never shifted
        (FUTURE,
         'datetime.fromisoformat(invoice["issued_on"]) > '
         "datetime.now(timezone.utc).replace(tzinfo=None)",
         "from datetime import datetime, timezone\n"),
        # the clock: the same instant made aware, not the local time read as UTC
        (AGE, "(datetime.now(timezone.utc) - loaded)", "from datetime import datetime, timezone\n"),
        (MODULE_FORM,
         "datetime.datetime(day.year, day.month, day.day).replace(tzinfo=datetime.timezone.utc)",
         "import datetime\n"),
        (EQUALITY,
         "day == datetime(2024, 1, 1) or day < datetime(2024, 3, 1).replace(tzinfo=timezone.utc)",
         "from datetime import datetime, timezone\n"),
    ],
)  # fmt: skip
def test_the_naive_side_becomes_aware_and_the_job_runs(
    tmp_path: Path, source: str, changed: str, import_line: str
) -> None:
    repo, evidence = _evidence(tmp_path, source)
    (candidate,) = NaiveAwareStrategy().fix(evidence, [])
    apply_edits(repo, candidate.edits)
    fixed = (repo / JOB).read_text()
    assert changed in fixed and import_line in fixed
    assert fixed.count("\n") == source.count("\n")
    done = run_script(repo, JOB)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "source",
    [
        UNKNOWN,  # `fromisoformat` of a text with an offset is aware: the variable is naive
        # two orderings on the line, each with a naive side: which one failed is unclear
        EQUALITY.replace("day == datetime(2024, 1, 1) or ", "datetime(2024, 1, 1) > day or "),
    ],
)
def test_what_the_line_does_not_settle_is_left_alone(tmp_path: Path, source: str) -> None:
    _, evidence = _evidence(tmp_path, source)
    assert NaiveAwareStrategy().fix(evidence, []) == []


def test_a_timezone_that_is_not_datetimes_is_never_shadowed(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "airflow_like.py").write_text("timezone = object()\n")
    event = script_failure(repo, JOB, SHADOWED, "job")
    assert NaiveAwareStrategy().fix(gather_airflow_evidence(event, repo), []) == []

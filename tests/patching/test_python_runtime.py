"""The Python fix-its with runtime evidence: names that exist only while the task runs (a CSV
row's header, a JSON payload's fields, a handler picked at run time) become real candidates.

Each job is a file committed in a real git repo, imported and run in this process until it
raises; patchit's Airflow callback builds the event from the live exception (as it does in a
task process), and the fixed file must then run cleanly with a real interpreter.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.integrations.airflow import build_event
from patchit.patching.apply import apply_edits
from patchit.patching.base import FixIt, PatchCandidate
from patchit.patching.fixits.python_calls import FixCallStrategy
from patchit.patching.fixits.python_keys import RenameKeyStrategy
from patchit.patching.fixits.python_names import FixNameStrategy
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo, run_script

CSV_JOB = """\
import csv
import pathlib

LANDING = pathlib.Path(__file__).parent / "invoices.csv"


def job():
    total = 0
    with LANDING.open(newline="") as handle:
        for row in csv.DictReader(handle):
            total += int(row["amout_cents"])
    return total


if __name__ == "__main__":
    print(job())
"""
CSV_DATA = "invoice_id,customer,amount_cents,tax_cents\n9001,acme,9900,1881\n"

PAYLOAD_JOB = """\
import json
import types

PAYLOAD = '{"order_id": 7, "amount": 1250, "customer": "ada", "lines": 3}'


def job():
    order = types.SimpleNamespace(**json.loads(PAYLOAD))
    return order.amout * 100


if __name__ == "__main__":
    print(job())
"""

HANDLER_JOB = """\
def write_csv(path, rows, delimiter=","):
    return len(rows)


def write_json(path, rows, indent=2):
    return len(rows)


WRITERS = {"csv": write_csv, "json": write_json}


def job(kind="csv"):
    writer = WRITERS[kind]
    return writer("out", rowz=[1, 2])


if __name__ == "__main__":
    print(job())
"""


class Dag:
    dag_id = "jobs"

    def __init__(self, fileloc: Path) -> None:
        self.fileloc = str(fileloc)


class Ti:
    dag_id = "jobs"
    task_id = "job"
    try_number = 1
    map_index = -1


@pytest.fixture(autouse=True)
def _forget_job_module() -> Iterator[None]:
    yield
    sys.modules.pop("job", None)


def failed_event(repo: Path, source: str, data: str | None = None) -> UniversalFailureEvent:
    """Commit `source` as dags/job.py, run its job() here until it raises, and return the
    event patchit's callback builds from the live exception."""
    path = repo / "dags" / "job.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    if data is not None:
        (path.parent / "invoices.csv").write_text(data)
    commit_all(repo, "add job")
    module = types.ModuleType("job")
    module.__file__ = str(path)
    sys.modules["job"] = module
    exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
    try:
        module.job()
    except Exception as exc:
        event = build_event({"ti": Ti(), "dag": Dag(path), "exception": exc})
        return UniversalFailureEvent.model_validate(event)
    raise AssertionError("the job did not fail")


def evidence_for(repo: Path, event: UniversalFailureEvent, runtime: bool = True) -> Evidence:
    if not runtime:
        event = event.model_copy(update={"runtime_locals": None})
    return gather_airflow_evidence(event, repo)


def assert_fixes(
    repo: Path, strategy: FixIt, evidence: Evidence, search: str, replace: str
) -> PatchCandidate:
    (candidate,) = strategy.fix(evidence, [])
    (edit,) = candidate.edits
    assert (edit.path, edit.search.strip(), edit.replace.strip()) == (
        "dags/job.py",
        search,
        replace,
    )
    apply_edits(repo, candidate.edits)
    done = run_script(repo, "dags/job.py")
    assert done.returncode == 0, done.stderr
    return candidate


def test_a_csv_rows_header_names_the_key(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = failed_event(repo, CSV_JOB, CSV_DATA)
    assert RenameKeyStrategy().fix(evidence_for(repo, event, runtime=False), []) == []
    evidence = evidence_for(repo, event)
    assert evidence.runtime_locals is not None
    assert evidence.runtime_locals.path == "dags/job.py"  # made relative to the repo
    assert "row: dict(4) keys: invoice_id: str, customer: str" in evidence.packed_log
    candidate = assert_fixes(
        repo, RenameKeyStrategy(), evidence,
        'total += int(row["amout_cents"])', 'total += int(row["amount_cents"])',
    )  # fmt: skip
    assert "the run's row (keys recorded at run time)" in candidate.rationale


def test_an_object_built_from_a_json_payload_names_the_attribute(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = failed_event(repo, PAYLOAD_JOB)
    assert FixNameStrategy().fix(evidence_for(repo, event, runtime=False), []) == []
    candidate = assert_fixes(
        repo, FixNameStrategy(), evidence_for(repo, event),
        "return order.amout * 100", "return order.amount * 100",
    )  # fmt: skip
    assert "the object had at run time" in candidate.rationale


def test_the_handler_picked_at_run_time_names_the_keyword(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = failed_event(repo, HANDLER_JOB)
    assert event.error_message == "write_csv() got an unexpected keyword argument 'rowz'"
    assert FixCallStrategy().fix(evidence_for(repo, event, runtime=False), []) == []
    assert_fixes(
        repo, FixCallStrategy(), evidence_for(repo, event),
        'return writer("out", rowz=[1, 2])', 'return writer("out", rows=[1, 2])',
    )  # fmt: skip


def test_two_equally_near_runtime_keys_is_no_guess(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    data = "invoice_id,amount_net,amount_vat\n1,2,3\n"
    event = failed_event(repo, CSV_JOB.replace("amout_cents", "amount_nat"), data)
    assert RenameKeyStrategy().fix(evidence_for(repo, event), []) == []


def test_runtime_keys_are_the_truth_no_static_fallback(tmp_path: Path) -> None:
    """The repo spells a near key elsewhere, but the row the code read has no near key."""
    repo = init_repo(tmp_path / "repo")
    source = CSV_JOB.replace("total = 0\n", 'total = 0\n    spelled = {"amount_cents": 0}\n')
    event = failed_event(repo, source, "invoice_id,price\n1,2\n")
    assert RenameKeyStrategy().fix(evidence_for(repo, event, runtime=False), []) != []
    assert RenameKeyStrategy().fix(evidence_for(repo, event), []) == []


def test_a_row_cut_short_by_the_cap_offers_no_candidates(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    header = ",".join([*(f"c{i:03d}" for i in range(80)), "amount_cents"])
    data = header + "\n" + ",".join(["1"] * 81) + "\n"
    event = failed_event(repo, CSV_JOB, data)
    assert event.runtime_locals is not None and event.runtime_locals.locals["row"].truncated
    assert RenameKeyStrategy().fix(evidence_for(repo, event), []) == []


def test_runtime_locals_of_another_frame_are_not_used(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = failed_event(repo, CSV_JOB, CSV_DATA)
    assert event.runtime_locals is not None
    moved = event.runtime_locals.model_copy(update={"line": event.runtime_locals.line + 1})
    evidence = evidence_for(repo, event.model_copy(update={"runtime_locals": moved}))
    assert RenameKeyStrategy().fix(evidence, []) == []
    outside = event.runtime_locals.model_copy(update={"path": "/elsewhere/job.py"})
    evidence = evidence_for(repo, event.model_copy(update={"runtime_locals": outside}))
    assert evidence.runtime_locals is None
    assert any("/elsewhere/job.py ignored" in note for note in evidence.notes)


def test_a_family_of_near_runtime_keys_is_no_guess(tmp_path: Path) -> None:
    """amount_cents split into net and gross: net is nearer by spelling, and wrong."""
    repo = init_repo(tmp_path / "repo")
    data = "invoice_id,amount_net_cents,amount_gross_cents\n1,2,3\n"
    event = failed_event(repo, CSV_JOB.replace("amout_cents", "amount_cents"), data)
    assert nearest("amount_cents", ["amount_net_cents", "amount_gross_cents"]) is not None
    assert RenameKeyStrategy().fix(evidence_for(repo, event), []) == []


def test_a_family_of_near_runtime_attributes_is_no_guess(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    payload = '{"order_id": 7, "amount_net_cents": 1000, "amount_gross_cents": 1250}'
    source = PAYLOAD_JOB.replace(PAYLOAD_JOB.split("'")[1], payload)
    event = failed_event(repo, source.replace("order.amout", "order.amount_cents"))
    assert event.error_message.endswith("has no attribute 'amount_cents'")
    assert FixNameStrategy().fix(evidence_for(repo, event), []) == []

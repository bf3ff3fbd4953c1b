"""The data check on real Airflow 3: a task's return value (XCom) and the file it writes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.fidelity import DataCheck, check_candidate
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.airflow.home import ensure_template_db, template_db_path
from patchit.harnesses.base import Workspace
from patchit.sandbox.worktree import create_worktree, remove_worktree
from tests.conftest import commit_all, git

pytestmark = pytest.mark.slow

DAG_FILE = "dags/invoices.py"
DAG = '''"""Invoice totals: returns the VAT-inclusive total and writes it to a file."""
from datetime import datetime
from pathlib import Path

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

OUT = Path(__file__).resolve().parents[1] / "output"
RATES = {"vat_rate": 0.2, "vat_rate_reduced": 0.05}


def invoice_total(**context):
    total = round(100 * (1 + RATES["vat_rate"]), 2)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "invoice.txt").write_text(f"{context['ds']} total={total} in {OUT}\\n")
    return {"total": total, "file": str(OUT / "invoice.txt")}


with DAG(dag_id="invoices", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="invoice_total", python_callable=invoice_total)
'''


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow-template-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHIT_HOME", str(home))
        path, _ = ensure_template_db()
    return path


@pytest.fixture(scope="module")
def harness() -> Iterator[AirflowHarness]:
    with AirflowHarness(warm=True) as airflow:
        airflow.start()
        yield airflow


def test_a_key_fix_that_changes_the_return_value_and_file_is_caught(
    tmp_path: Path, _patchit_home: Path, template_db: Path, harness: AirflowHarness
) -> None:
    cached = template_db_path()  # this test's PATCHIT_HOME gets the module's migrated DB
    cached.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template_db, cached)
    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / DAG_FILE).write_text(DAG)
    (repo / ".gitignore").write_text("output/\n__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    good = commit_all(repo, "invoices")
    (repo / DAG_FILE).write_text(DAG.replace('RATES["vat_rate"]', 'RATES["vat_rat"]'))
    failing = commit_all(repo, "invoices: typo")
    event = UniversalFailureEvent(
        source=FailureSource.AIRFLOW, pipeline_id="invoices", unit_id="invoice_total",
        unit_path=DAG_FILE,
        logical_date=datetime(2024, 1, 1, tzinfo=UTC), repo_path=str(repo), commit=failing,
        error_type="KeyError", error_message="'vat_rat'",
        context={"dags_folder": str(repo / "dags")},
    )  # fmt: skip
    sandbox = _patchit_home / "sandboxes" / "inc"

    def candidate(number: int, key: str) -> DataCheck:
        root = create_worktree(repo, failing, _patchit_home / "worktrees" / "inc-candidate")
        try:
            dag = root / DAG_FILE
            dag.write_text(dag.read_text().replace('RATES["vat_rat"]', f'RATES["{key}"]'))
            workspace = Workspace(root=root, scratch=sandbox / f"candidate-{number}")
            result = harness.verify(workspace, event)
            assert result.passed, result.output
            return check_candidate(event, None, repo, harness, workspace, result,
                                   baseline_commit=None, work=sandbox / "baseline")  # fmt: skip
        finally:
            remove_worktree(repo, root)

    wrong = candidate(1, "vat_rate_reduced")  # the other key that exists: green, wrong total
    assert wrong.status == "differs" and wrong.needs_review, wrong.summary
    assert wrong.kind == "airflow" and wrong.baseline_commit == good
    verdicts = {(o.kind, o.name): o for o in wrong.outputs}
    value = verdicts[("xcom", "invoice_total.return_value")]
    assert value.verdict == "unexpected"
    assert '"total": 120.0' in value.sample and '"total": 105.0' in value.sample
    written = verdicts[("file", "root/output/invoice.txt")]
    assert written.verdict == "unexpected" and "total=105.0" in written.sample
    assert "NEEDS REVIEW" in wrong.summary and "invoice_total.return_value" in wrong.summary
    assert wrong.baseline_runs == 2

    right = candidate(2, "vat_rate")
    # the worktree's path is in the return value and the file: normalised, they compare equal
    assert right.status == "same" and not right.needs_review, right.summary
    assert {o.name for o in right.outputs} == {
        "invoice_total.return_value", "root/output/invoice.txt"
    }  # fmt: skip
    assert (
        "harness airflow" in right.fidelity() and "data check: same as baseline" in right.fidelity()
    )
    assert not (repo / "output").exists()  # the user's checkout never ran anything

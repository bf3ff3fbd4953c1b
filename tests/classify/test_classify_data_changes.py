"""Data, not code: a breaking change that touched only data files, and a value that does not fit
its type while the code is unchanged, on real dbt runs and real Python tracebacks."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass, Verdict
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.intake.airflow_scan import split_error
from tests.classify.test_classify_real_dbt import _event
from tests.conftest import commit_all, git, run_dbt
from tests.evidence.airflow_failures import init_repo, run_script

pytestmark = pytest.mark.slow


def _dbt_verdict(repo: Path, tmp_path: Path, *select: str) -> tuple[str, Verdict]:
    """Run dbt on the committed repo; the one failed node's message and verdict."""
    snapshot = tmp_path / "snap.duckdb"
    shutil.copy(repo / "shop.duckdb", snapshot)
    res = run_dbt(repo, "build", "--select", *select)
    assert res.returncode == 1, res.stdout[-2000:]
    results = json.loads((repo / "target" / "run_results.json").read_text())["results"]
    (failed,) = [r for r in results if r["status"] == "error"]
    manifest = json.loads((repo / "target" / "manifest.json").read_text())
    event = _event(
        repo,
        failed["unique_id"],
        manifest["nodes"][failed["unique_id"]]["original_file_path"],
        status="error",
        error_message=failed["message"],
        artifacts={"manifest": str(repo / "target" / "manifest.json")},
    )
    return failed["message"], classify_failure(
        gather_dbt_evidence(event, repo, db_snapshot=snapshot)
    )


def _break_seed(repo: Path) -> None:
    seed = repo / "seeds" / "raw_orders.csv"
    lines = seed.read_text().splitlines(keepends=True)
    first = lines[1].split(",")
    first[2] = "n/a"  # order_date
    lines[1] = ",".join(first)
    seed.write_text("".join(lines))


def test_a_seed_value_change_alone_is_a_data_issue(shop_repo: Path, tmp_path: Path) -> None:
    _break_seed(shop_repo)
    commit_all(shop_repo, "seeds: refresh orders export")
    message, verdict = _dbt_verdict(shop_repo, tmp_path, "raw_orders", "stg_orders")
    assert "Conversion Error: CSV Error on Line: 2" in message  # the seed's DATE column
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "data_files_changed")
    assert "seeds/raw_orders.csv" in verdict.reason


def test_a_conversion_error_on_unchanged_sql_is_a_data_issue(
    shop_repo: Path, tmp_path: Path
) -> None:
    _break_seed(shop_repo)
    (shop_repo / "ops").mkdir()
    (shop_repo / "ops" / "backfill.sh").write_text("dbt seed --full-refresh\n")
    commit_all(shop_repo, "seeds: refresh orders export; a backfill script")
    _message, verdict = _dbt_verdict(shop_repo, tmp_path, "raw_orders", "stg_orders")
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "conversion_data")


def test_a_conversion_error_from_changed_sql_stays_a_code_bug(
    shop_repo: Path, tmp_path: Path
) -> None:
    model = shop_repo / "models" / "marts" / "orders.sql"
    model.write_text(
        model.read_text().replace("    o.status,", "    cast(o.status as integer) as status,")
    )
    commit_all(shop_repo, "orders: status codes")
    message, verdict = _dbt_verdict(shop_repo, tmp_path, "orders")
    assert "Conversion Error: Could not convert string '" in message
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "conversion_code_changed")


def test_a_misspelt_table_duckdb_corrects_to_a_project_relation_is_a_code_bug(
    shop_repo: Path, tmp_path: Path
) -> None:
    model = shop_repo / "models" / "marts" / "customer_segments.sql"
    model.write_text(model.read_text() + "where customer_id in (select customer_id from ordrs)\n")
    commit_all(shop_repo, "segments: only customers with orders")
    message, verdict = _dbt_verdict(shop_repo, tmp_path, "customer_segments")
    assert 'Did you mean "orders"?' in message
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "catalog_error_project")


# -- Python: a landing file's value -------------------------------------------------------

JOB = textwrap.dedent(
    """\
    import csv
    import pathlib

    rows = csv.DictReader((pathlib.Path(__file__).parent / "orders.csv").open())
    print(sum(int(row["amount_cents"]) for row in rows))
    """
)
CSV = "order_id,amount_cents\n1,1250\n2,300\n"


def _python_event(repo: Path, rel: str) -> UniversalFailureEvent:
    proc = run_script(repo, rel)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error_type, message = split_error(proc.stderr)
    return UniversalFailureEvent(
        source="airflow", pipeline_id="scripts", unit_id="load", unit_path=rel,
        error_type=error_type, error_message=message, traceback=proc.stderr,
        repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"),
    )  # fmt: skip


@pytest.fixture
def job_repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "load.py").write_text(JOB)
    (repo / "jobs" / "orders.csv").write_text(CSV)
    commit_all(repo, "load: sum the orders")
    assert run_script(repo, "jobs/load.py").stdout.strip() == "1550"
    return repo


def _python_verdict(repo: Path) -> tuple[UniversalFailureEvent, Verdict]:
    event = _python_event(repo, "jobs/load.py")
    return event, classify_failure(gather_airflow_evidence(event, repo))


def test_a_landing_csv_change_alone_is_a_data_issue(job_repo: Path) -> None:
    (job_repo / "jobs" / "orders.csv").write_text(CSV.replace("1,1250", "1,n/a"))
    commit_all(job_repo, "landing: new export")
    event, verdict = _python_verdict(job_repo)
    assert event.error_message == "invalid literal for int() with base 10: 'n/a'"
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "data_files_changed")


def test_a_value_error_on_unchanged_code_is_a_data_issue(job_repo: Path) -> None:
    (job_repo / "jobs" / "orders.csv").write_text(CSV.replace("1,1250", "1,n/a"))
    (job_repo / "ops.sh").write_text("python jobs/load.py\n")
    commit_all(job_repo, "landing: new export; a run script")
    _event, verdict = _python_verdict(job_repo)
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "value_error_data")
    assert "jobs/load.py did not change" in verdict.reason


def test_a_landing_csv_change_with_a_readme_is_still_data_only_and_names_the_column(
    job_repo: Path,
) -> None:
    (job_repo / "jobs" / "orders.csv").write_text(CSV.replace("1,1250", "1,n/a"))
    (job_repo / "README.md").write_text("orders come from the new CRM\n")
    commit_all(job_repo, "landing: new export; readme")
    event = _python_event(job_repo, "jobs/load.py")
    evidence = gather_airflow_evidence(event, job_repo)
    verdict = classify_failure(evidence)
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "data_files_changed")
    assert "README.md" not in verdict.reason
    assert evidence.conversion is not None
    assert (evidence.conversion.column, evidence.conversion.relation) == (
        "amount_cents",
        "jobs/orders.csv",
    )
    assert evidence.conversion.samples == ["n/a"] and evidence.conversion.changed


def test_a_value_error_from_changed_code_stays_a_code_bug(job_repo: Path) -> None:
    job = job_repo / "jobs" / "load.py"
    job.write_text(JOB.replace('int(row["amount_cents"])', 'int(row["amount_cents"] + ".0")'))
    commit_all(job_repo, "load: amounts as decimals")
    _event, verdict = _python_verdict(job_repo)
    assert verdict.cls is FailureClass.CODE_BUG

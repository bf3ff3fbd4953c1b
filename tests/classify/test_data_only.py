"""A breaking change of data files only is a data issue, whatever the error looks like; a
note or README beside the data does not make it a code change; code beside it does."""

from __future__ import annotations

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.classify.signatures import changed_data_files, is_doc_file
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence, TracebackFrame
from tests.classify.test_classifier import ORDERS, _evidence

BINDER = ('Binder Error: Referenced column "net_cents" not found in FROM clause!\n'
          'Candidate bindings: "net_amount_cents"')  # fmt: skip
CONVERSION = "Conversion Error: Could not convert string 'n/a' to INT32"


@pytest.mark.parametrize(
    "changed",
    [
        ("seeds/raw_invoices.csv",),
        ("seeds/raw_invoices.csv", "README.md"),
        ("data/rates.json", "docs/notes.rst", "CHANGELOG"),
        ("landing/orders.parquet",),
    ],
)
def test_only_data_files_changed_is_a_data_issue_even_for_a_binder_error(
    changed: tuple[str, ...],
) -> None:
    verdict = classify_failure(_evidence(BINDER, changed=changed))
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "data_files_changed")
    assert "README" not in verdict.reason and "notes.rst" not in verdict.reason


@pytest.mark.parametrize(
    "changed", [("seeds/raw_invoices.csv", ORDERS), ("seeds/raw_invoices.csv", "macros/m.sql")]
)
def test_data_and_code_changed_is_not_data_only(changed: tuple[str, ...]) -> None:
    verdict = classify_failure(_evidence(BINDER, changed=changed))
    assert verdict.cls is FailureClass.CODE_BUG


MISSING_SEED = (
    "Model 'model.shop.stg_orders' (models/staging/stg_orders.sql) depends on a node named "
    "'raw_orders' which was not found"
)


def test_a_seed_renamed_away_from_its_refs_is_a_code_bug() -> None:
    """Found on jaffle_shop_duckdb: `git mv seeds/raw_orders.csv seeds/raw_sales_orders.csv`
    with `ref('raw_orders')` left was "only data files changed": escalated, not followed."""
    renamed = ("seeds/raw_orders.csv", "seeds/raw_sales_orders.csv")
    verdict = classify_failure(_evidence(MISSING_SEED, changed=renamed))
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "missing_node")
    deleted = classify_failure(_evidence(MISSING_SEED, changed=("seeds/raw_orders.csv",)))
    assert deleted.cls is FailureClass.CODE_BUG
    # another seed's rows changing is still data
    other = classify_failure(_evidence(MISSING_SEED, changed=("seeds/raw_payments.csv",)))
    assert (other.cls, other.signature) == (FailureClass.DATA_ISSUE, "data_files_changed")


def test_a_readme_alone_is_no_data_change() -> None:
    assert changed_data_files(_evidence(BINDER, changed=("README.md",))) == []
    assert is_doc_file("docs/LICENSE") and not is_doc_file("models/readme_model.sql")


def test_a_conversion_error_on_unchanged_sql_is_a_data_issue() -> None:
    verdict = classify_failure(_evidence(CONVERSION, changed=("ops/backfill.sh",)))
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "conversion_data")


def test_a_conversion_error_from_changed_sql_is_a_code_bug() -> None:
    verdict = classify_failure(_evidence(CONVERSION, changed=(ORDERS,)))
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "conversion_code_changed")


def _airflow(message: str, changed: tuple[str, ...]) -> Evidence:
    error_type, _, text = message.partition(": ")
    event = UniversalFailureEvent(source=FailureSource.AIRFLOW, pipeline_id="orders",
                                  unit_id="load", unit_path="dags/orders.py",
                                  error_type=error_type, error_message=text)  # fmt: skip
    frame = TracebackFrame(path="dags/lib/parse.py", line=3, function="parse", code="x = f(v)")
    return Evidence(event=event, repo_root="/repo", unit_path="dags/orders.py", error=message,
                    changed_files=list(changed), frames=[frame])  # fmt: skip


@pytest.mark.parametrize(
    "message",
    [
        "ValueError: invalid literal for int() with base 10: 'n/a'",
        "ValueError: could not convert string to float: '0,085'",
        "ValueError: time data '04/02/2025' does not match format '%Y-%m-%d'",
        "ValueError: Invalid isoformat string: '04/02/2025'",
        "decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]",
    ],
)
def test_a_value_error_on_unchanged_code_is_a_data_issue(message: str) -> None:
    unchanged = classify_failure(_airflow(message, ("dags/other_dag.py",)))
    assert (unchanged.cls, unchanged.signature) == (FailureClass.DATA_ISSUE, "value_error_data")
    changed = classify_failure(_airflow(message, ("dags/lib/parse.py",)))
    assert changed.cls is FailureClass.CODE_BUG

"""A breaking change of data files only is a data issue, whatever the error looks like; a
note or README beside the data does not make it a code change; code beside it does."""

from __future__ import annotations

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.classify.signatures import changed_data_files, is_doc_file
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


def test_a_readme_alone_is_no_data_change() -> None:
    assert changed_data_files(_evidence(BINDER, changed=("README.md",))) == []
    assert is_doc_file("docs/LICENSE") and not is_doc_file("models/readme_model.sql")


def test_a_conversion_error_on_unchanged_sql_is_a_data_issue() -> None:
    verdict = classify_failure(_evidence(CONVERSION, changed=("ops/backfill.sh",)))
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "conversion_data")


def test_a_conversion_error_from_changed_sql_is_a_code_bug() -> None:
    verdict = classify_failure(_evidence(CONVERSION, changed=(ORDERS,)))
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "conversion_code_changed")

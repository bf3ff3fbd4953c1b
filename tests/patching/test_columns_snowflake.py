"""The column fix-it on Snowflake's `invalid identifier 'X'` (upper-cased, no candidates: the
columns of the relations read are the pool) and on the emulator's upper-cased DuckDB binder
error (its candidates, in the SQL's case). The messages are those of
tests/classify/test_classify_snowflake.py; tests/test_snowflake.py heals the real thing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchit.evidence.model import Evidence, Relation
from patchit.examples import SHOP
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.columns import RenameColumnStrategy
from patchit.patching.fixits.snowflake_columns import as_duckdb, spelled
from tests.classify.test_classify_snowflake import (
    DAILY,
    EMULATED_COLUMN,
    IDENTIFIER,
    QUALIFIED_IDENTIFIER,
)
from tests.patching.scenarios import make_evidence

ORDERS = "models/marts/orders.sql"
ORDER_COLUMNS = ["ORDER_ID", "CUSTOMER_ID", "ORDER_DATE", "STATUS", "AMOUNT"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dest = tmp_path / "shop"
    shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    daily = dest / DAILY
    daily.write_text(daily.read_text().replace("sum(amount) as revenue", "sum(amont) as revenue"))
    orders = dest / ORDERS
    orders.write_text(orders.read_text().replace("o.status,", "o.stauts,"))
    return dest


def _evidence(project: Path, message: str, path: str, upstream: list[Relation]) -> Evidence:
    uid = "model.shop." + path.rpartition("/")[2].removesuffix(".sql")
    return make_evidence(
        project, message, unit_id=uid, unit_path=path, error_type="Database Error",
        upstream=upstream,
    )  # fmt: skip


def _fixed(project: Path, evidence: Evidence, path: str) -> str:
    [candidate] = RenameColumnStrategy().fix(evidence, [])
    apply_edits(project, candidate.edits)
    return (project / path).read_text()


def test_invalid_identifier_follows_to_the_near_column_of_the_relations_read(
    project: Path,
) -> None:
    upstream = [Relation(name="orders", columns=ORDER_COLUMNS)]  # as Snowflake's catalog has them
    text = _fixed(project, _evidence(project, IDENTIFIER, DAILY, upstream), DAILY)
    assert "sum(amount) as revenue" in text and "AMOUNT" not in text


def test_a_qualified_invalid_identifier_keeps_its_qualifier(project: Path) -> None:
    upstream = [Relation(name="orders", columns=ORDER_COLUMNS)]
    text = _fixed(project, _evidence(project, QUALIFIED_IDENTIFIER, ORDERS, upstream), ORDERS)
    assert "    o.status,\n" in text and "stauts" not in text


def test_invalid_identifier_with_no_columns_known_gives_no_candidate(project: Path) -> None:
    assert RenameColumnStrategy().fix(_evidence(project, IDENTIFIER, DAILY, []), []) == []


def test_the_emulators_upper_cased_binder_error_is_read_in_the_sqls_case(project: Path) -> None:
    text = _fixed(project, _evidence(project, EMULATED_COLUMN, DAILY, []), DAILY)
    assert "sum(amount) as revenue" in text


def test_only_a_snowflake_message_is_rewritten(project: Path) -> None:
    evidence = _evidence(project, "Binder Error: whatever", DAILY, [])
    assert as_duckdb(evidence, "Binder Error: whatever", "select 1") == (
        evidence,
        "Binder Error: whatever",
    )
    assert spelled("select sum(amont) from t", "AMONT") == "amont"
    assert spelled("select 1", "AMONT") == "AMONT"

"""The column fix-it on Postgres's "column does not exist": the HINT is the candidate; with no
HINT (or one naming two columns) the near-name search over the relations read applies. The
messages are the ones real dbt-postgres 1.10.2 on PostgreSQL 15 gives (see
tests/classify/test_classify_postgres.py); tests/test_postgres.py runs the real thing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchit.evidence.model import Evidence, Relation
from patchit.examples import SHOP
from patchit.patching.apply import apply_edits
from patchit.patching.base import PatchCandidate
from patchit.patching.fixits.columns import RenameColumnStrategy
from tests.classify.test_classify_postgres import COLUMN, DAILY, QUALIFIED_COLUMN
from tests.patching.scenarios import make_evidence

ORDERS = "models/marts/orders.sql"
NO_HINT = COLUMN.replace(
    '\n  HINT:  Perhaps you meant to reference the column "orders.amount".', ""
)
TWO_HINTS = COLUMN.replace(
    'column "orders.amount".', 'column "orders.amount" or the column "p.amount".'
)
ORDER_COLUMNS = ["order_id", "customer_id", "order_date", "status", "amount"]


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


def test_the_hint_names_the_column_and_the_bare_name_stays_bare(project: Path) -> None:
    evidence = _evidence(project, COLUMN, DAILY, [])  # no warehouse columns: the HINT alone
    [candidate] = RenameColumnStrategy().fix(evidence, [])
    assert "sum(amount) as revenue" in _apply(project, candidate)
    assert "HINT names (orders.amount)" in candidate.rationale
    assert candidate.rationale.startswith("Postgres has no column amont")


def test_a_qualified_column_keeps_its_qualifier(project: Path) -> None:
    evidence = _evidence(project, QUALIFIED_COLUMN, ORDERS, [])
    [candidate] = RenameColumnStrategy().fix(evidence, [])
    text = _apply(project, candidate)
    assert "    o.status,\n" in text and "stauts" not in text


def test_no_hint_falls_back_to_the_near_columns_read(project: Path) -> None:
    evidence = _evidence(project, NO_HINT, DAILY, [Relation(name="orders", columns=ORDER_COLUMNS)])
    [candidate] = RenameColumnStrategy().fix(evidence, [])
    assert "sum(amount) as revenue" in _apply(project, candidate)
    assert "only near column" in candidate.rationale


def test_no_hint_and_no_columns_known_gives_no_candidate(project: Path) -> None:
    assert RenameColumnStrategy().fix(_evidence(project, NO_HINT, DAILY, []), []) == []


def test_a_hint_naming_two_columns_is_not_followed(project: Path) -> None:
    # two relations have it: the near-name search decides, and no columns are known here
    evidence = _evidence(project, TWO_HINTS, DAILY, [])
    assert RenameColumnStrategy().fix(evidence, []) == []


def test_other_postgres_errors_are_not_column_typos(project: Path) -> None:
    message = NO_HINT.replace('column "amont"', 'relation "analytics.x"')
    assert RenameColumnStrategy().fix(_evidence(project, message, DAILY, []), []) == []


def _apply(project: Path, candidate: PatchCandidate) -> str:
    apply_edits(project, candidate.edits)
    return (project / candidate.edits[0].path).read_text()

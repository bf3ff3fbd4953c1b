"""The corpus on Postgres (`patchit bench --warehouse postgres`): dbt scenarios through the
real runner on a throw-away PostgreSQL cluster: an escalation, and a fix that needs the
warehouse's columns (an upstream rename read through a subquery, its columns from
information_schema on Postgres), its branch's hidden check matching the good commit's. The
full run is `patchit bench --warehouse postgres`.

Run elsewhere, not here again: the column typo healed on Postgres end to end, its data check
the same as the baseline (tests/test_postgres.py); the plain upstream rename's fix from parsed
SQL (tests/patching/test_columns_parsed.py) and its columns from information_schema
(tests/evidence/test_pg_columns.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.warehouse_bench import assert_fix_and_escalation

pytestmark = pytest.mark.slow

# the mart keeps its column: the hidden check sees the good values
RENAME = "dbt_upstream_rename_subquery"


def test_a_fix_and_an_escalation_on_postgres_match_duckdb(tmp_path: Path) -> None:
    assert_fix_and_escalation(
        "postgres", RENAME, "starting a throw-away PostgreSQL cluster", tmp_path
    )

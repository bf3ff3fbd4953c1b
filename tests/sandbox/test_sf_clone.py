"""The zero-copy clones of the Snowflake sandbox, as SQL: `at(timestamp => ...)` freezes a
clone at the failing run's start (Snowflake's time travel), in UTC whatever zone the time
came in. The emulator has no time travel (tests/test_snowflake.py: the clone falls back to
the table as it is, and says so). And the failing run's manifest rewritten to name patchit's
own database, where `--defer` then reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from patchit.errors import HarnessError
from patchit.sandbox.sf_database import check_name, rewrite_sf_manifest
from patchit.sandbox.snowflake import clone_sql

DEST, SOURCE = '"DB"."PATCHIT_X_C1"."ORDER_LOG"', '"DB"."ANALYTICS"."ORDER_LOG"'


def test_without_a_moment_the_clone_is_of_the_table_as_it_is() -> None:
    assert clone_sql(DEST, SOURCE, None) == f"create table {DEST} clone {SOURCE}"


def test_a_clone_at_the_failing_runs_start_names_the_moment_in_utc() -> None:
    started = datetime(2026, 11, 29, 4, 5, 6, 789000, tzinfo=timezone(timedelta(hours=2)))
    sql = clone_sql(DEST, SOURCE, started)
    assert sql == (
        f"create table {DEST} clone {SOURCE} at(timestamp => to_timestamp_tz("
        "'2026-11-29 02:05:06.789000 +00:00', 'YYYY-MM-DD HH24:MI:SS.FF6 TZH:TZM'))"
    )


def test_a_naive_moment_is_read_as_utc() -> None:
    naive = clone_sql(DEST, SOURCE, datetime(2026, 1, 2, 3, 4, 5))
    aware = clone_sql(DEST, SOURCE, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert naive == aware and "'2026-01-02 03:04:05.000000 +00:00'" in naive


def test_the_manifest_names_patchits_database_for_the_users_nodes_only(tmp_path: Path) -> None:
    """`--defer` reads where the rewritten manifest places a node: the user's database's nodes
    move to patchit's clone (as the profile spelt it, or folded), another database's stay."""
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({
        "nodes": {
            "model.shop.orders": {"database": "shop", "schema": "analytics",
                                  "relation_name": "shop.analytics.orders"},
            "model.shop.ext": {"database": "OTHER", "relation_name": "OTHER.raw.ext"},
        },
        "sources": {"source.shop.raw.c": {"database": "SHOP",
                                          "relation_name": '"SHOP"."RAW"."C"'}},
    }))  # fmt: skip
    dest = tmp_path / "state.json"
    rewrite_sf_manifest(manifest, dest, "shop", "PATCHIT_DB_0123456789AB")
    data = json.loads(dest.read_text())
    orders = data["nodes"]["model.shop.orders"]
    assert orders["database"] == "PATCHIT_DB_0123456789AB"
    assert orders["relation_name"] == "PATCHIT_DB_0123456789AB.analytics.orders"
    assert data["nodes"]["model.shop.ext"]["relation_name"] == "OTHER.raw.ext"
    source = data["sources"]["source.shop.raw.c"]
    assert source["relation_name"] == 'PATCHIT_DB_0123456789AB."RAW"."C"'


def test_patchit_touches_no_database_it_did_not_name() -> None:
    with pytest.raises(HarnessError, match="not patchit's own"):
        check_name("ANALYTICS")
    check_name("PATCHIT_DB_0123456789AB")

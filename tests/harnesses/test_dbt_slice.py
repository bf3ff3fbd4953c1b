"""The warehouse slice: what a selection reads, told from a manifest in dbt's shape, and the
slice cut from a real DuckDB snapshot that is never written (fast: DuckDB, no dbt; the real-dbt
runs on a slice are in test_dbt.py)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from patchit.harnesses.dbt.slice import (
    fill_slice,
    graph_of,
    missed_relation,
    release_snapshots,
    selection_reads,
    slice_database,
)
from patchit.harnesses.dbt.units import DbtOutcome


def _model(name: str, parents: list[str], materialized: str = "table") -> dict[str, Any]:
    return {
        "resource_type": "model", "name": name, "package_name": "shop", "database": "shop",
        "schema": "main", "alias": name, "original_file_path": f"models/{name}.sql",
        "patch_path": "shop://models/schema.yml" if name == "orders" else None,
        "config": {"materialized": materialized}, "depends_on": {"nodes": parents},
    }  # fmt: skip


def _test(name: str, parents: list[str]) -> dict[str, Any]:
    return {
        "resource_type": "test", "name": name, "package_name": "shop",
        "original_file_path": "models/schema.yml", "config": {}, "depends_on": {"nodes": parents},
    }  # fmt: skip


MANIFEST: dict[str, Any] = {
    "metadata": {"project_name": "shop"},
    "sources": {
        "source.shop.raw.payments": {
            "source_name": "raw",
            "name": "payments",
            "schema": "raw",
            "identifier": "Payments",
        },
    },
    "nodes": {
        "model.shop.stg_customers": _model("stg_customers", []),
        "model.shop.stg_orders": _model("stg_orders", []),
        "model.shop.stg_payments": _model("stg_payments", ["source.shop.raw.payments"]),
        "model.shop.eph": _model("eph", ["model.shop.stg_payments"], "ephemeral"),
        "model.shop.orders": _model("orders", ["model.shop.stg_orders", "model.shop.eph"]),
        "model.shop.orders_daily": _model("orders_daily", ["model.shop.orders"], "incremental"),
        "model.shop.customers": _model("customers", ["model.shop.stg_customers"]),
        "model.shop.unrelated": _model("unrelated", []),
        "test.shop.rel_orders_customers": _test(
            "rel_orders_customers", ["model.shop.customers", "model.shop.orders"]
        ),
    },
}


def _reads(selectors: list[str], changed: tuple[str, ...] = (), root: Path = Path("/nowhere")):  # type: ignore[no-untyped-def]
    return selection_reads(graph_of(MANIFEST), selectors, changed, root)


def test_a_selection_reads_its_nodes_their_parents_through_ephemerals_and_its_tests_parents() -> (
    None
):
    reads = _reads(["orders+"])
    assert reads == {
        ("main", "orders"), ("main", "orders_daily"),  # built (the incremental keeps its rows)
        ("main", "stg_orders"), ("main", "stg_payments"),  # read (through the ephemeral)
        ("main", "customers"),  # read by the relationships test dbt selects with orders
    }  # fmt: skip
    assert ("main", "unrelated") not in reads and ("main", "stg_customers") not in reads


def test_at_selects_ancestors_path_selects_a_yaml_files_nodes_and_an_intersection_its_name() -> (
    None
):
    at = _reads(["@orders_daily"])
    assert {("main", "stg_orders"), ("raw", "payments"), ("main", "orders")} <= at
    assert _reads(["path:models/schema.yml+"]) == _reads(["orders+"])
    assert _reads(["@orders,stg_orders"]) == {("main", "stg_orders")}


def test_what_the_manifest_cannot_place_copies_everything(tmp_path: Path) -> None:
    assert _reads(["state:modified+"]) is None
    assert _reads(["orders+", "brand_new_model+"]) is None
    hooked = {**MANIFEST, "nodes": {**MANIFEST["nodes"], "operation.shop.shop-on-run-start-0": {
        "resource_type": "operation", "name": "shop-on-run-start-0"}}}  # fmt: skip
    assert selection_reads(graph_of(hooked), ["orders+"], (), tmp_path) is None


def test_a_changed_files_new_refs_and_sources_are_read(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    sql = "select * from {{ ref('stg_orders') }} join {{ ref('shop', 'unrelated') }} u\n"
    (tmp_path / "models" / "orders.sql").write_text(
        sql + "join {{ source('raw', 'payments') }} p using (id)\n"
    )
    reads = _reads(["orders+"], ("orders",), tmp_path)
    assert reads is not None and {("main", "unrelated"), ("raw", "payments")} <= reads
    (tmp_path / "models" / "orders.sql").write_text("select * from {{ ref('stg_orderz') }}\n")
    assert _reads(["orders+"], ("orders",), tmp_path) is None  # a ref the manifest lacks


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(tmp_path: Path, *statements: str) -> Path:
    """An incident snapshot, `snapshot/shop.duckdb`, made by `statements`."""
    snapshot = tmp_path / "snapshot" / "shop.duckdb"
    snapshot.parent.mkdir()
    with duckdb.connect(str(snapshot)) as con:
        for statement in statements:
            con.execute(statement)
    return snapshot


def test_a_slice_holds_the_relations_asked_for_and_the_snapshot_is_never_written(
    tmp_path: Path,
) -> None:
    snapshot = _snapshot(
        tmp_path,
        "create table main.stg_orders as select range as id from range(5)",
        "create table main.unrelated as select 1 as x",
        "create schema raw",
        'create table raw."Payments" as select 7 as amount',
        # dbt-duckdb qualifies a view's relations with the file's catalog name
        'create view main.orders as select id * 2 as id from "shop"."main"."stg_orders"',
    )
    before = (_digest(snapshot), snapshot.stat().st_mtime_ns)

    dest = tmp_path / "wt" / "shop.duckdb"
    wanted = {("main", "stg_orders"), ("main", "orders"), ("raw", "payments"), ("main", "gone")}
    assert slice_database(snapshot, dest, wanted) == 3

    assert (_digest(snapshot), snapshot.stat().st_mtime_ns) == before
    with duckdb.connect(str(dest)) as con:
        tables = con.execute(
            "select table_catalog, table_schema, table_name from information_schema.tables"
        ).fetchall()
        assert sorted(tables) == [
            ("shop", "main", "orders"), ("shop", "main", "stg_orders"), ("shop", "raw", "Payments"),
        ]  # fmt: skip
        assert con.execute("select sum(id) from main.orders").fetchone() == (20,)
        assert con.execute('select amount from raw."Payments"').fetchone() == (7,)
    # the snapshot stays attached for the next candidate until released; then it opens
    # writable: nothing of the slice holds a lock on it
    release_snapshots()
    with duckdb.connect(str(snapshot)) as con:
        assert con.execute("select count(*) from main.unrelated").fetchone() == (1,)


@pytest.mark.parametrize(
    ("message", "missed"),
    [
        ("Catalog Error: Table with name raw_orders does not exist!\nDid you mean ...", True),
        ('Binder Error: Referenced column "amout" not found in FROM clause!', False),
    ],
)
def test_a_run_that_missed_a_relation_is_told_apart(message: str, missed: bool) -> None:
    outcome = DbtOutcome(success=False, results=[{"status": "error", "message": message}])
    assert missed_relation(outcome) is missed


def test_filling_a_slice_adds_only_what_it_lacks(tmp_path: Path) -> None:
    snapshot = _snapshot(
        tmp_path,
        "create table main.built as select 1 as n",
        "create table main.other as select 2 as n",
    )
    dest = tmp_path / "wt" / "shop.duckdb"
    assert slice_database(snapshot, dest, {("main", "built")}) == 1
    with duckdb.connect(str(dest)) as con:  # the run rebuilt it
        con.execute("create or replace table main.built as select 10 as n")
    fill_slice(dest, snapshot, [("main", "built"), ("MAIN", "Other"), ("main", "nowhere")])
    with duckdb.connect(str(dest), read_only=True) as con:
        assert con.execute("select n from main.built").fetchone() == (10,)
        assert con.execute("select n from main.other").fetchone() == (2,)
    fill_slice(dest, None, [("main", "x")])  # no slice: nothing to do


def test_a_snapshot_s_relations_are_read_from_the_slicing_connection(tmp_path: Path) -> None:
    """`snapshot_relations` (what `warehouse_relations` reads: every table and view, by name)
    attaches the snapshot the slice is cut with, once; the harness does it as soon as the
    incident's snapshot is made (`DbtHarness.snapshot_taken`)."""
    from patchit.harnesses.dbt import slice as slicing
    from patchit.harnesses.dbt.harness import DbtHarness
    from patchit.sandbox.snapshot import warehouse_relations

    snapshot = _snapshot(
        tmp_path,
        "create table main.stg_orders as select 1 as id",
        "create schema raw",
        "create view raw.payments as select 2 as amount",
    )
    release_snapshots()
    try:
        assert slicing.snapshot_relations(snapshot) == warehouse_relations(snapshot)
        assert slicing.snapshot_relations(snapshot) == {"stg_orders", "payments"}
        attached = slicing._SNAPSHOT["con"]
        assert slicing.snapshot_relations(snapshot) == {"stg_orders", "payments"}
        assert slicing._SNAPSHOT["con"] is attached  # read once
        release_snapshots()
        harness = DbtHarness(warm=False)
        harness.snapshot_taken(snapshot)
        for _ in range(200):
            if "con" in slicing._SNAPSHOT:
                break
            time.sleep(0.01)
        assert "con" in slicing._SNAPSHOT
        harness.close()  # released with the harness
        assert "con" not in slicing._SNAPSHOT
    finally:
        release_snapshots()
    assert slicing.snapshot_relations(tmp_path / "missing.duckdb") == set()

"""The schema-only clone of a DuckDB snapshot, and DuckDB's binder against it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from patchit.screen.clone import BindError, SchemaClone
from patchit.screen.render import Unsure


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "snapshot" / "shop.duckdb"
    path.parent.mkdir()
    with duckdb.connect(str(path)) as con:
        con.execute("create table orders (order_id integer, status varchar, amount decimal(18, 2))")
        con.execute("insert into orders values (1, 'placed', 12.5)")
        con.execute(
            "create view stg_orders as select order_id, upper(status) as status from orders"
        )
        con.execute("create schema app")
        con.execute("create type mood as enum ('ok', 'sad')")
        con.execute("create table app.users (user_id integer, tags varchar[], feel mood)")
    return path


def test_relations_are_empty_tables_with_the_snapshots_columns(snapshot: Path) -> None:
    clone = SchemaClone(snapshot)
    try:
        assert clone.catalog == "shop"
        assert clone.relation("shop", "main", "ORDERS") == '"shop"."main"."orders"'
        assert clone.relation(None, "main", "stg_orders") == '"shop"."main"."stg_orders"'
        users = clone.relation("shop", "app", "users")
        assert clone.bind(f"select user_id, tags[1], feel from {users}")
        # the snapshot's types, not its rows
        assert clone.bind("select sum(amount) from orders") == "select sum(amount) from orders"
        rows = clone._con.execute('select count(*) from "shop"."main"."orders"').fetchall()
        assert rows == [(0,)]
    finally:
        clone.close()
    assert duckdb.connect(str(snapshot), read_only=True).execute(
        "select count(*) from orders"
    ).fetchall() == [(1,)]


def test_parser_and_binder_errors_are_certain(snapshot: Path) -> None:
    clone = SchemaClone(snapshot)
    clone.relation("shop", "main", "orders")
    with pytest.raises(BindError, match='Referenced column "statuss" not found'):
        clone.bind("select statuss from orders")
    with pytest.raises(BindError, match="sum\\(VARCHAR\\)"):
        clone.bind("select sum(status) from orders")
    with pytest.raises(BindError, match="Parser Error"):
        clone.bind("select order_id,, status from orders")
    clone.close()


def test_other_errors_are_unsure(snapshot: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    clone = SchemaClone(snapshot)
    with pytest.raises(Unsure, match="Catalog Error"):
        clone.bind("select * from not_cloned")  # a relation no screen asked for
    with pytest.raises(Unsure, match="Catalog Error"):
        clone.bind("select my_udf(1)")
    with pytest.raises(Unsure, match="disabled by configuration"):
        clone.bind(f"select * from read_csv('{secret}')")
    with pytest.raises(Unsure, match="not in the warehouse snapshot"):
        clone.relation("shop", "main", "customers")
    with pytest.raises(Unsure, match="another database"):
        clone.relation("lake", "main", "orders")
    # a type only the file or an extension knows
    clone._columns[("main", "odd")] = [("x", "NO_SUCH_TYPE")]
    clone._names[("main", "odd")] = ("main", "odd")
    with pytest.raises(Unsure, match=r"cannot rebuild main\.odd"):
        clone.relation("shop", "main", "odd")
    clone.close()


def test_only_one_select_is_explained_and_never_run(snapshot: Path) -> None:
    clone = SchemaClone(snapshot)
    orders = clone.relation("shop", "main", "orders")
    with pytest.raises(Unsure, match="exactly one SELECT"):
        clone.bind(f"select 1; drop table {orders}")
    with pytest.raises(Unsure, match="exactly one SELECT"):
        clone.bind(f"delete from {orders}")
    with pytest.raises(Unsure):
        clone.bind("set enable_external_access = true")
    assert clone.bind(f"select order_id from {orders};  ") == f"select order_id from {orders}"
    clone.close()


def test_a_trial_reshapes_a_relation_and_rolls_back(snapshot: Path) -> None:
    clone = SchemaClone(snapshot)
    orders = clone.relation("shop", "main", "orders")
    with clone.trial():
        clone.replace(orders, "select 7 as order_id, 1 as added -- a comment at the end")
        clone.replace('"shop"."marts"."fresh"', "select 2 as y")
        clone.bind(f"select added from {orders}")
        clone.bind('select y from "shop"."marts"."fresh"')
        with pytest.raises(BindError):
            clone.bind(f"select status from {orders}")
    clone.bind(f"select status from {orders}")
    with pytest.raises(Unsure):
        clone.bind('select y from "shop"."marts"."fresh"')
    clone.close()


def test_a_snapshot_that_cannot_be_cloned_is_unsure(tmp_path: Path) -> None:
    junk = tmp_path / "shop.duckdb"
    junk.write_text("not a database")
    with pytest.raises(Unsure, match=r"cannot clone shop\.duckdb"):
        SchemaClone(junk)
    reserved = tmp_path / "memory.duckdb"  # DuckDB's own catalog has that name
    duckdb.connect(str(reserved)).close()
    with pytest.raises(Unsure, match=r"cannot clone memory\.duckdb"):
        SchemaClone(reserved)

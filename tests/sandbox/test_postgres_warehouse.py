"""patchit's own connection to a real PostgreSQL 15 (tests/pg_cluster.py): sandbox schemas made
and dropped by name only, the user's relations listed read-only, and the data check's
comparison of two sandbox schemas inside the server."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from patchit.errors import HarnessError
from patchit.fidelity.pg_data import PgWarehouseDiff
from patchit.sandbox.postgres import PgWarehouse
from tests.pg_cluster import PgCluster

pytestmark = pytest.mark.slow
_N = itertools.count()


def _names(n: int) -> tuple[str, str, str]:
    """A user schema and two sandbox schemas of its own for one test."""
    return f"wh_user_{n}", f"patchit_{n:012x}", f"patchit_{n + 500:012x}"


def _schemas(pg: PgCluster) -> set[str]:
    return {str(r[0]) for r in pg.execute("select nspname from pg_namespace")}


def test_sandbox_schemas_are_made_and_dropped_by_name_only(pg: PgCluster) -> None:
    user, box, _ = _names(next(_N))
    pg.execute(f"create schema {user}; create table {user}.orders as select 1 as id")
    warehouse = PgWarehouse(pg.profile(user))
    try:
        warehouse.reset(box)
        pg.execute(f"create schema {box}_marts; create table {box}.t as select 1 as x")
        assert {box, f"{box}_marts"} <= _schemas(pg)
        assert "orders" in warehouse.relations() and "t" not in warehouse.relations()
        warehouse.reset(box)  # what a run left is dropped, the schema is empty again
        assert f"{box}_marts" not in _schemas(pg)
        assert pg.execute(f"select count(*) from pg_tables where schemaname = '{box}'") == [(0,)]
        for name in (user, "public", "patchit_x", f"{box}_marts"):
            with pytest.raises(HarnessError, match="not a patchit sandbox"):
                warehouse.drop(name)
        warehouse.drop(box)
        assert box not in _schemas(pg) and user in _schemas(pg)
        assert warehouse.schemas_exist([user]) and not warehouse.schemas_exist([box])
    finally:
        warehouse.close()


def test_an_unreachable_server_is_one_line_naming_it(pg: PgCluster) -> None:
    output = {**pg.profile("x"), "port": 1, "connect_timeout": 2}
    with pytest.raises(HarnessError, match=r"postgres 127\.0\.0\.1:1/postgres: cannot connect"):
        PgWarehouse(output).relations()


def test_two_sandbox_schemas_are_compared_inside_the_server(pg: PgCluster) -> None:
    user, base, cand = _names(next(_N))
    rows = "select g as id, g * 10 as amount, 'x' || g as label from generate_series(1, 20) g"
    changed = rows.replace("g * 10", "case when g = 7 then 71 else g * 10 end")
    pg.execute(
        f"create schema {base}; create schema {cand}; create schema {base}_marts;"
        f"create schema {cand}_marts;"
        f"create table {base}.orders as {rows}; create table {cand}.orders as {changed};"
        f"create table {base}_marts.daily as {rows}; create table {cand}_marts.daily as {rows};"
        f"create table {base}.gone as select 1 as id;"
        f"create schema {user}; create table {user}.stg as select 1 as id;"
        f"create table {user}.stg_b as select 1 as plan_id;"
        f"create table {base}.stg_b as select 1 as plan_code"
    )
    with PgWarehouseDiff(pg.profile(user), base, cand) as diff:
        orders = diff.compare(cand, "orders")
        assert orders.label == f"{user}.orders"
        assert orders.differing == ["amount"] and orders.schema_changes == []
        assert orders.base is not None and orders.base.rows == 20
        sample = diff.sample(orders, ["amount"])
        assert sample.splitlines()[0].split(" | ")[0].strip() == "side"
        assert "baseline  | 7  | x7    | 70" in sample
        assert "candidate | 7  | x7    | 71" in sample
        # dbt's `<schema>_<custom>` schemas map to each other; by label as well as by name
        daily = diff.compare(f"{base}_marts", "daily")
        assert daily.label == f"{user}_marts.daily" and not daily.differs
        assert not diff.compare(f"{user}_marts", "daily").differs
        gone = diff.compare(base, "gone")
        assert gone.base is not None and gone.cand is None and gone.differs
        # what a run did not build is the user's relation its --defer read
        shared = diff.compare(cand, "stg")
        assert shared.base is not None and shared.cand is not None and not shared.differs
        built = diff.compare(base, "stg_b")
        assert built.base is not None and built.base.columns == {"plan_code": "integer"}
        assert built.cand is not None and built.cand.columns == {"plan_id": "integer"}
        assert built.schema_changes == ["-plan_code integer", "+plan_id integer"]


def test_an_incidents_schemas_are_dropped_when_it_ends_and_the_rest_on_close(
    pg: PgCluster, tmp_path: Path
) -> None:
    from patchit.harnesses.dbt.pg import PgSchemas

    user, _, _ = _names(next(_N))
    schemas = PgSchemas()
    schemas.clone = "never"  # in the user's database (a clone's: tests/sandbox/test_pg_clone.py)
    one = schemas.place(pg.profile(user), tmp_path / "sandboxes" / "inc-1" / "candidate-1").schema
    two = schemas.place(pg.profile(user), tmp_path / "sandboxes" / "inc-2" / "candidate-1").schema
    assert {one, two} <= _schemas(pg)
    assert schemas.release(tmp_path / "sandboxes" / "inc-1") == []
    assert one not in _schemas(pg) and two in _schemas(pg)
    assert schemas.close() == []
    assert two not in _schemas(pg)


def test_the_users_relations_are_read_where_the_manifest_places_its_nodes(
    pg: PgCluster, tmp_path: Path
) -> None:
    """What `--defer` can read: the target's schema and the schemas the failing run's manifest
    places nodes in; a same-named table of another environment's schema is not the node built."""
    import json

    from patchit.harnesses.dbt.pg import PgSchemas

    n = next(_N)
    user, other, marts = f"wh_user_{n}", f"wh_other_{n}", f"wh_user_{n}_marts"
    pg.execute(
        f"create schema {user}; create schema {other}; create schema {marts};"
        f"create table {user}.orders as select 1 as id;"
        f"create view {marts}.revenue as select 1 as total;"
        f"create table {other}.customers as select 1 as id;"
    )
    node = {"resource_type": "model", "database": "postgres"}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"nodes": {
        "model.p.orders": {**node, "schema": user},
        "model.p.revenue": {**node, "schema": marts},
        "model.p.customers": {**node, "schema": user},
        "model.p.elsewhere": {**node, "schema": other, "database": "another_db"},
        "test.p.t": {"resource_type": "test", "schema": other, "database": "postgres"},
    }}))  # fmt: skip
    schemas = PgSchemas()
    schemas.clone = "never"
    try:
        placed = schemas.place(pg.profile(user), tmp_path / "candidate-1", manifest)
        pg.execute(f"create table {placed.schema}.customers as select 1 as id")  # never read
        assert placed.relations == {"orders", "revenue"}
        again = schemas.place(pg.profile(user), tmp_path / "candidate-2", manifest)
        assert again.relations == {"orders", "revenue"}
        without = schemas.place(pg.profile(user), tmp_path / "candidate-3")
        assert without.relations == {"orders"}  # no manifest: the target's schema only
    finally:
        assert schemas.close() == []


def test_a_users_table_is_copied_into_the_sandbox_without_touching_it(pg: PgCluster) -> None:
    """Constraints and indexes come along, the defaults do not (a `nextval` would advance the
    user's sequence); a partitioned table's size is its partitions'; a generated column
    leaves the rows alone."""
    user, box, _ = _names(next(_N))
    pg.execute(
        f"create schema {user};"
        f"create table {user}.log (id serial primary key, v int not null);"
        f"insert into {user}.log (v) select g from generate_series(1, 30) g;"
        f"create table {user}.parts (id int, v text) partition by range (id);"
        f"create table {user}.parts_1 partition of {user}.parts for values from (0) to (100000);"
        f"insert into {user}.parts select g, repeat('x', 100) from generate_series(1, 20000) g;"
        f"create table {user}.gen (a int, b int generated always as (a * 2) stored);"
        f"insert into {user}.gen (a) values (1), (2);"
        f"create view {user}.v as select 1 as x"
    )
    before = pg.execute(f"select last_value from {user}.log_id_seq")
    warehouse = PgWarehouse(pg.profile(user))
    try:
        warehouse.reset(box)
        copied = warehouse.copy_table(box, (user, "log"), (f"{box}_marts", "log"), 2**30)
        assert (copied.rows, copied.rows_only) == (30, False)
        assert pg.execute(
            "select column_default, is_nullable from information_schema.columns "
            f"where table_schema = '{box}_marts' and table_name = 'log' order by ordinal_position"
        ) == [(None, "NO"), (None, "NO")]
        pg.execute(f"insert into {box}_marts.log values (31, 31)")
        with pytest.raises(Exception, match="duplicate key"):  # the primary key came along
            pg.execute(f"insert into {box}_marts.log values (31, 31)")
        assert pg.execute(f"select last_value from {user}.log_id_seq") == before
        pg.execute(f"alter table {user}.log alter id drop default; drop sequence {user}.log_id_seq")
        big = warehouse.copy_table(box, (user, "parts"), (box, "parts"), 2**20)
        assert big.rows is None and "above the copy limit" in big.why and big.size > 2**20
        generated = warehouse.copy_table(box, (user, "gen"), (box, "gen"), 2**20)
        assert (generated.rows, generated.rows_only) == (2, True)
        view = warehouse.copy_table(box, (user, "v"), (box, "v"), 2**20)
        assert view.rows is None and "is not a table" in view.why
        assert warehouse.copy_table(box, (user, "nope"), (box, "n"), 1).rows is None
        assert pg.execute(f"select count(*) from {user}.log") == [(30,)]
    finally:
        warehouse.drop(box)
        warehouse.close()


def test_a_copy_waits_for_a_lock_only_so_long_and_says_so(
    pg: PgCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg2

    from patchit.sandbox import postgres

    user, box, _ = _names(next(_N))
    pg.execute(f"create schema {user}; create table {user}.log as select 1 as id")
    monkeypatch.setattr(postgres, "COPY_LOCK_TIMEOUT_S", 1)
    other = psycopg2.connect(**postgres.connect_args(pg.profile(user)))
    warehouse = PgWarehouse(pg.profile(user))
    try:
        with other.cursor() as cur:  # the user's own run rebuilding the table
            cur.execute(f"lock table {user}.log in access exclusive mode")
            warehouse.reset(box)
            with pytest.raises(HarnessError, match="lock timeout"):
                warehouse.copy_table(box, (user, "log"), (box, "log"), 2**20)
        other.rollback()
        assert pg.execute(f"select count(*) from pg_tables where schemaname = '{box}'") == [(0,)]
        assert warehouse.copy_table(box, (user, "log"), (box, "log"), 2**20).rows == 1
    finally:
        other.close()
        warehouse.drop(box)
        warehouse.close()

"""WarehouseDiff on real DuckDB files: schema, rows, order-independent checksums, sample."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from patchit.errors import HarnessError
from patchit.fidelity.dbt_data import WarehouseDiff


def _db(path: Path, *sql: str) -> Path:
    con = duckdb.connect(str(path))
    for statement in sql:
        con.execute(statement)
    con.close()
    return path


def test_same_rows_in_another_order_are_the_same(tmp_path: Path) -> None:
    base = _db(
        tmp_path / "a.duckdb",
        "create table t as select * from (values (1, 'x'), (2, 'y')) v(id, name)",
    )
    cand = _db(
        tmp_path / "b.duckdb",
        "create table t as select * from (values (2, 'y'), (1, 'x')) v(id, name)",
    )
    with WarehouseDiff(base, cand) as wh:
        diff = wh.compare("main", "t")
    assert not diff.differs and diff.base is not None and diff.base.rows == 2


def test_duplicated_rows_do_not_cancel_out(tmp_path: Path) -> None:
    # a XOR of hashes would make (1,1,2) and (2) agree; the sum does not
    base = _db(
        tmp_path / "a.duckdb", "create table t as select * from (values (1), (1), (2)) v(id)"
    )
    cand = _db(
        tmp_path / "b.duckdb", "create table t as select * from (values (2), (3), (3)) v(id)"
    )
    with WarehouseDiff(base, cand) as wh:
        diff = wh.compare("main", "t")
    assert diff.differing == ["id"]


def test_schema_rows_and_a_bounded_sample(tmp_path: Path) -> None:
    base = _db(
        tmp_path / "a.duckdb",
        "create table t as select range as id, range * 2 as v, 'k' as gone from range(50)",
    )
    cand = _db(
        tmp_path / "b.duckdb",
        "create table t as select range as id, range * 3 as v, 1.5 as added from range(51)",
    )
    with WarehouseDiff(base, cand) as wh:
        diff = wh.compare("main", "t")
        assert diff.schema_changes == ["-gone VARCHAR", "+added DECIMAL(2,1)"]
        assert diff.differing == ["id", "v"]
        assert (diff.base and diff.base.rows, diff.cand and diff.cand.rows) == (50, 51)
        sample = wh.sample(diff, ["v"], limit=3)
        assert wh.stats("base", "main", "absent") is None
    lines = sample.splitlines()
    assert [c.strip() for c in lines[0].split("|")] == ["side", "id", "v"]
    assert sum(line.startswith("baseline") for line in lines) == 3
    assert sum(line.startswith("candidate") for line in lines) == 3


def test_a_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    base = _db(tmp_path / "a.duckdb", "create table t (id int)")
    with pytest.raises(HarnessError, match="cand database for the data check is missing"):
        WarehouseDiff(base, tmp_path / "nope.duckdb")

"""WarehouseDiff on real DuckDB files: schema, rows, order-independent checksums, sample."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from patchit.errors import HarnessError
from patchit.fidelity import dbt_data
from patchit.fidelity.dbt_data import WarehouseDiff, precompute_stats


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
        assert wh.base.stats("main", "absent") is None
    lines = sample.splitlines()
    assert [c.strip() for c in lines[0].split("|")] == ["side", "id", "v"]
    assert sum(line.startswith("baseline") for line in lines) == 3
    assert sum(line.startswith("candidate") for line in lines) == 3


def test_a_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    base = _db(tmp_path / "a.duckdb", "create table t (id int)")
    with pytest.raises(HarnessError, match="cand database for the data check is missing"):
        WarehouseDiff(base, tmp_path / "nope.duckdb")


def _attached() -> set[str]:
    rows = dbt_data._instance().cursor().execute("select database_name from duckdb_databases()")
    return {str(r[0]) for r in rows.fetchall()}


def test_checks_share_one_instance_and_leave_nothing_attached(tmp_path: Path) -> None:
    base = _db(tmp_path / "a.duckdb", "create table t as select range as id from range(5)")
    cand = _db(tmp_path / "b.duckdb", "create table t as select range as id from range(6)")
    before = _attached()
    # two checks at once against the same baseline file: it is attached once
    with WarehouseDiff(base, cand) as one, WarehouseDiff(base, base) as two:
        assert one.compare("main", "t").differs and not two.compare("main", "t").differs
        assert two.base.alias == two.cand.alias == one.base.alias
        assert len(_attached() - before) == 2
        one.close()
        assert len(_attached() - before) == 1  # the base stays for `two`
        assert two.sample(two.compare("main", "t"), ["id"]).splitlines() == ["side | id"]
    assert _attached() == before
    with pytest.raises(HarnessError, match="the cand database for the data check is missing"):
        WarehouseDiff(base, tmp_path / "missing.duckdb")
    assert _attached() == before  # the base attached before the failure is detached


def test_a_baselines_stats_are_read_once_per_file_version(tmp_path: Path) -> None:
    base = _db(tmp_path / "a.duckdb", "create table t as select range as id from range(5)")
    cand = _db(tmp_path / "b.duckdb", "create table t as select range as id from range(5)")
    precompute_stats(base, [("main", "t")])
    key = (dbt_data._version(base), "main", "t")
    assert dbt_data._STATS[key] is not None and dbt_data._STATS[key].rows == 5  # type: ignore[union-attr]
    dbt_data._STATS[key] = dbt_data.TableStats({"id": "BIGINT"}, 5, {"id": 0})  # a marker
    with WarehouseDiff(base, cand) as wh:
        assert wh.compare("main", "t").differing == ["id"]  # the kept stats were used
    _db(base, "insert into t values (99)")  # a new version of the file is read afresh
    with WarehouseDiff(base, cand) as wh:
        diff = wh.compare("main", "t")
    assert diff.base is not None and diff.base.rows == 6
    precompute_stats(tmp_path / "missing.duckdb", [("main", "t")])  # says nothing


def test_a_renamed_column_is_compared_with_its_old_self(tmp_path: Path) -> None:
    base = _db(
        tmp_path / "a.duckdb",
        "create table t as select range as id, date '2026-01-01' + range::int as ordered_at,"
        " range % 3 as flag from range(20)",
    )
    cand = _db(
        tmp_path / "b.duckdb",
        "create table t as select range as id, date '2026-01-01' + range::int as order_date,"
        " range % 4 as flag_v2 from range(20)",
    )
    with WarehouseDiff(base, cand) as wh:
        diff = wh.compare("main", "t")
    # the same values under a new name: a rename; other values under a new name: not one
    assert diff.renamed == {"order_date": "ordered_at"}


def test_two_dropped_columns_with_the_same_values_are_no_rename(tmp_path: Path) -> None:
    base = _db(
        tmp_path / "a.duckdb", "create table t as select range as a, range as b from range(5)"
    )
    cand = _db(tmp_path / "b.duckdb", "create table t as select range as c from range(5)")
    with WarehouseDiff(base, cand) as wh:
        assert wh.compare("main", "t").renamed == {}

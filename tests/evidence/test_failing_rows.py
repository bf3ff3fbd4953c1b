"""Sampling the rows of a failing data test from a database copy."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.evidence.failing_rows import sample_failing_rows, whole_rows


def make_db(path: Path) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute(
            "create table customers as select * from (values (1, 'a'), (2, null)) t(id, email)"
        )
    return path


def test_rows_of_the_test_query(tmp_path: Path) -> None:
    db = make_db(tmp_path / "w.duckdb")
    rows, note = sample_failing_rows("select * from customers where email is null;", db)
    assert note is None
    assert rows == [{"id": "2", "email": "NULL"}]


def test_a_broken_query_is_a_note_not_an_error(tmp_path: Path) -> None:
    db = make_db(tmp_path / "w.duckdb")
    rows, note = sample_failing_rows("select nope from customers", db)
    assert rows == [] and note is not None and "not sampled" in note


def test_a_slow_query_is_interrupted(tmp_path: Path) -> None:
    db = make_db(tmp_path / "w.duckdb")
    slow = "select count(*) from range(100000000000) a, range(1000) b"
    rows, note = sample_failing_rows(slow, db, timeout_s=0.5)
    assert rows == [] and note is not None


def make_wide_db(path: Path) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute(
            "create table customers as select * from (values ('ada', 1, 'FR', 10), "
            "('bob', 2, null, 20), ('cy', 3, null, 30)) t(name, customer_id, country, spend)"
        )
    return path


def test_a_not_null_sample_carries_the_key_column(tmp_path: Path) -> None:
    db = make_wide_db(tmp_path / "w.duckdb")
    compiled = 'select country\nfrom "w"."main"."customers"\nwhere country is null\n'
    rows, note = sample_failing_rows(compiled, db, column="country")
    assert note is None
    assert [list(r) for r in rows] == [["customer_id", "country", "name", "spend"]] * 2
    assert [r["customer_id"] for r in rows] == ["2", "3"]
    assert sample_failing_rows(compiled, db)[0] == [{"country": "NULL"}] * 2  # column unknown


def test_only_plain_selects_are_widened() -> None:
    assert whole_rows("select country from t where country is null") == (
        "SELECT * FROM t WHERE country IS NULL"
    )
    for sql in (
        "select country, count(*) from t group by country having count(*) > 1",
        "with v as (select country as value_field from t) select * from v",
        "select a.x from a join b on a.id = b.id where b.id is null",
        "select distinct country from t",
        "select count(*) from t",
        "select 1 union all select 2",
        "not sql at all (",
    ):
        assert whole_rows(sql) is None, sql

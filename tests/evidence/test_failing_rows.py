"""Sampling the rows of a failing data test from a database copy."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.evidence.failing_rows import sample_failing_rows


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

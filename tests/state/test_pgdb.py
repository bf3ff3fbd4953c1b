"""The sqlite-utils-shaped adapter: the memory's migrations build the same schema on Postgres
as on SQLite, and the SQL the memory writes reads the same on both."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from patchit.memory import MIGRATIONS, apply_migrations
from patchit.state.pg import MEMORY_LOCK_KEY, PgConn, connect, to_pg
from patchit.state.pgdb import ROWID, PgDatabase


def sqlite_schema(path: Path) -> dict[str, dict[str, Any]]:
    db = Database(sqlite3.connect(str(path)))
    apply_migrations(db)
    schema = {}
    for name in db.table_names():
        table = db[name]
        schema[name] = {
            "columns": [c.name for c in table.columns],  # type: ignore[union-attr]
            "pk": table.pks,  # type: ignore[union-attr]
            "not_null": sorted(c.name for c in table.columns if c.notnull),  # type: ignore[union-attr]
        }
    return schema


def pg_schema(db: PgDatabase) -> dict[str, dict[str, Any]]:
    schema = {}
    for name in db.table_names():
        rows = list(db.query(
            "select column_name, is_nullable from information_schema.columns"
            " where table_schema = current_schema() and table_name = ? order by ordinal_position",
            [name],
        ))  # fmt: skip
        pk = db.primary_keys(name)
        schema[name] = {
            "columns": [r["column_name"] for r in rows if r["column_name"] != ROWID],
            "pk": pk,
            # SQLite's integer primary key is nullable in its table info; Postgres' is not
            "not_null": sorted(
                r["column_name"] for r in rows
                if r["is_nullable"] == "NO" and r["column_name"] not in (ROWID, *pk)
            ),
        }  # fmt: skip
    return schema


def test_the_migrations_build_the_same_tables_and_columns(tmp_path: Path, state_url: str) -> None:
    expected = sqlite_schema(tmp_path / "m.sqlite3")
    for table in expected.values():
        table["not_null"] = [c for c in table["not_null"] if c not in table["pk"]]
    db = PgDatabase.connect(state_url, MEMORY_LOCK_KEY)
    try:
        assert apply_migrations(db) == [m.__name__ for m in MIGRATIONS]
        assert apply_migrations(db) == []  # applied once
        assert pg_schema(db) == expected
    finally:
        db.close()


def test_rows_insert_upsert_update_and_read_back(state_url: str) -> None:
    db = PgDatabase.connect(state_url, MEMORY_LOCK_KEY)
    try:
        apply_migrations(db)
        db.conn.execute("BEGIN IMMEDIATE")
        assert db.conn.in_transaction
        incident = {"id": "i1", "fingerprint": "f", "cause_key": "c", "created_utc": "t",
                    "updated_utc": "t"}  # fmt: skip
        db.table("incidents").insert(incident)
        db.conn.execute("COMMIT")
        assert not db.conn.in_transaction
        assert (
            db.table("llm_calls")
            .insert(
                {"incident_id": "i1", "purpose": "propose", "outcome": "ok", "created_utc": "t"}
            )
            .last_pk
            == 1
        )
        db.table("last_good").upsert({"project_key": "p", "commit": "a", "updated_utc": "t"},
                                     pk="project_key")  # fmt: skip
        db.table("last_good").upsert({"project_key": "p", "commit": "b", "updated_utc": "t"},
                                     pk="project_key")  # fmt: skip
        db.table("incidents").update("i1", {"summary": "100% broken"})
        rows = list(db.query("select [commit] from last_good where project_key = ?", ["p"]))
        assert rows == [{"commit": "b"}]
        [row] = db.query("select * from incidents where repo_path is ?", [None])
        assert row["summary"] == "100% broken" and ROWID not in row
        assert row["status"] == "open" and row["needs_human"] == 0  # the defaults
        [totals] = db.query("select coalesce(sum(tokens_in), 0) as n from llm_calls")
        assert totals == {"n": 0} and isinstance(totals["n"], int)
        events = [{"event_id": "e1", "incident_id": "i1", "fingerprint": "f", "cause_key": "c",
                   "json": '{"commit": "abc"}'}] * 2  # fmt: skip
        db.table("events").insert_all(events, ignore=True)
        [sha] = db.query("select json_extract(json, '$.commit') as sha from events")
        assert sha == {"sha": "abc"}
    finally:
        db.close()


def test_sqlite_flavoured_sql_is_translated() -> None:
    assert to_pg("select 1 where a is ? and b is not ? and c = ?") == (
        "select 1 where a is not distinct from %s and b is distinct from %s and c = %s"
    )
    assert to_pg("select [commit] from t where x like '5%'") == (
        "select \"commit\" from t where x like '5%%'"
    )
    assert to_pg("set claims = max(claims - 1, 0)") == "set claims = greatest(claims - 1, 0)"
    assert to_pg("select max(created_utc) from t") == "select max(created_utc) from t"


def test_string_literals_are_not_translated(state_url: str) -> None:
    sql = "select 'is it?' as q, '[x] is ?' as r, ? as n where 'a''?' is not ?"
    assert to_pg(sql) == (
        "select 'is it?' as q, '[x] is ?' as r, %s as n where 'a''?' is distinct from %s"
    )
    conn = PgConn(connect(state_url))
    try:
        assert conn.execute(sql, (1, None)).fetchone() == ("is it?", "[x] is ?", 1)
    finally:
        conn.close()

"""A schema-only clone of a DuckDB warehouse snapshot, and DuckDB's binder run against it.

The snapshot is attached read-only once, its columns (names and types, tables and views alike)
are read, and it is detached again: the clone is an in-memory database under the snapshot's
own catalog name (so dbt's `"shop"."main"."orders"` resolves), in which a relation becomes an
empty table with the same columns the first time a screen needs it. External access is then
switched off and locked, so the SQL a candidate hands to `EXPLAIN` can read no file and load
no extension.

`bind(sql)` is DuckDB's parser and binder and nothing more: exactly one SELECT statement is
explained (never executed). A parser or binder error is certain (the same DuckDB binds the
same SQL against the same columns in the harness run); any other error (a missing table or
function, a permission refused) is not, and is `Unsure`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from patchit.screen.render import Unsure


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class BindError(Exception):
    """DuckDB's parser or binder refused the SQL (internal: becomes a rejection)."""


class SchemaClone:
    """Empty tables shaped like the snapshot's relations, made on first use."""

    def __init__(self, snapshot: Path) -> None:
        started = time.monotonic()
        self._con = duckdb.connect(":memory:")
        self._names: dict[tuple[str, str], tuple[str, str]] = {}
        try:
            self.catalog, self._columns = self._read(snapshot)
            self._con.execute(f"ATTACH ':memory:' AS {quote(self.catalog)}")
            self._con.execute(f"USE {quote(self.catalog)}")
            self._con.execute("SET enable_external_access = false")
            self._con.execute("SET lock_configuration = true")
        except (duckdb.Error, OSError, Unsure) as exc:
            self._con.close()
            raise Unsure(f"cannot clone {snapshot.name}: {first_line(exc)}") from exc
        self._made: set[tuple[str, str]] = set()
        self.build_ms = int((time.monotonic() - started) * 1000)

    def _read(self, snapshot: Path) -> tuple[str, dict[tuple[str, str], list[tuple[str, str]]]]:
        """(the catalog name DuckDB gives the file, {(schema, relation) lowered: columns})."""
        self._con.execute(f"ATTACH {_literal(str(snapshot))} (READ_ONLY)")
        (catalog,) = self._con.execute(
            "select database_name from duckdb_databases() where path = ?", [str(snapshot)]
        ).fetchone() or (None,)
        if not isinstance(catalog, str):
            raise Unsure(f"{snapshot.name} did not attach")
        rows = self._con.execute(
            "select schema_name, table_name, column_name, data_type from duckdb_columns()"
            " where database_name = ? order by schema_name, table_name, column_index",
            [catalog],
        ).fetchall()
        self._con.execute(f"DETACH {quote(catalog)}")
        columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for schema, table, column, data_type in rows:
            columns.setdefault((schema.lower(), table.lower()), []).append((column, data_type))
        self._names = {(s.lower(), t.lower()): (s, t) for s, t, _, _ in rows}
        return catalog, columns

    def relation(self, database: str | None, schema: str, name: str) -> str:
        """Make sure the clone holds `schema.name` (from the snapshot); its quoted name.
        Unsure when the snapshot has no such relation or its types cannot be rebuilt."""
        if database and database.lower() != self.catalog.lower():
            raise Unsure(f"{database}.{schema}.{name} is in another database than the snapshot")
        key = (schema.lower(), name.lower())
        if key not in self._columns:
            raise Unsure(f"{schema}.{name} is not in the warehouse snapshot")
        real_schema, real_name = self._names[key]
        qualified = f"{quote(self.catalog)}.{quote(real_schema)}.{quote(real_name)}"
        if key not in self._made:
            cols = ", ".join(f"{quote(c)} {t}" for c, t in self._columns[key])
            try:
                self._con.execute(
                    f"CREATE SCHEMA IF NOT EXISTS {quote(self.catalog)}.{quote(real_schema)}"
                )
                self._con.execute(f"CREATE TABLE {qualified} ({cols})")
            except duckdb.Error as exc:  # a type only an extension or the file knows
                raise Unsure(f"cannot rebuild {schema}.{name}: {first_line(exc)}") from exc
            self._made.add(key)
        return qualified

    def bind(self, sql: str) -> str:
        """Parse and bind `sql` (EXPLAIN); returns the one SELECT statement's text. BindError
        on a parser or binder error, Unsure on any other error or when it is not exactly one
        SELECT."""
        try:
            statements = self._con.extract_statements(sql)
        except duckdb.ParserException as exc:
            raise BindError(str(exc)) from exc
        except duckdb.Error as exc:
            raise Unsure(f"DuckDB: {first_line(exc)}") from exc
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            raise Unsure("the SQL is not exactly one SELECT statement")
        query = statements[0].query.rstrip().rstrip(";")
        try:
            self._con.execute(f"EXPLAIN {query}")
        except (duckdb.ParserException, duckdb.BinderException) as exc:
            raise BindError(str(exc)) from exc
        except duckdb.Error as exc:
            raise Unsure(f"DuckDB: {first_line(exc)}") from exc
        return query

    def replace(self, qualified: str, query: str) -> None:
        """Give `qualified` the columns `query` (as `bind` returned it) yields: a changed
        upstream model, inside `trial()`. Unsure if that cannot be done."""
        schema = qualified.rsplit(".", 1)[0]
        try:
            self._con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            self._con.execute(
                f"CREATE OR REPLACE TABLE {qualified} AS SELECT * FROM (\n{query}\n) LIMIT 0"
            )
        except duckdb.Error as exc:
            raise Unsure(f"cannot shape {qualified} from its new SQL: {first_line(exc)}") from exc

    @contextmanager
    def trial(self) -> Iterator[None]:
        """One candidate's changes to the clone, rolled back after: the next one starts from
        the snapshot's shapes."""
        self._con.execute("BEGIN TRANSACTION")
        try:
            yield
        finally:
            self._con.execute("ROLLBACK")

    def close(self) -> None:
        self._con.close()


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"

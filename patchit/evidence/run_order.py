"""A relation missing when the unit read it, and there once the run was over: built by the same
run, after the unit.

dbt orders a build by the graph, and a source is no node of it: a source declared over the
schema a seed (or a hook, or another model) writes is read whenever its tests or models come,
which on a first build of an empty warehouse is before the seed. The public
Saurabh-DS/datavault-dbt-duckdb-medallion declares its raw tables as sources over its own seeds:
a first `dbt build` fails the eight source tests with `Catalog Error: Table with name
raw_claims does not exist!`, seeds them afterwards, and a second build passes. Nothing in the
SQL is wrong, so no patch of it is the fix; the report says so and what to run.

The incident's DuckDB snapshot is the warehouse as the failing run left it: a relation the
error names, with its schema (from the `LINE n: from "db"."schema"."table"` excerpt: dbt
renders refs and sources qualified), that is in the snapshot was created during the run. An
unqualified name is not judged: the table may exist in another schema than the one meant.
On Postgres the user's `information_schema` is asked the same, once the run has exited
(`relation "raw.raw_claims" does not exist` names the schema when the SQL did), as the column
evidence reads it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_MISSING = re.compile(r"Catalog Error: (?:Table|View) with name (?P<table>[\w\"]+) does not exist")
_PART = r"(?:\"[^\"]+\"|\w+)"
_READ = re.compile(rf"\b(?:from|join)\s+(?P<rel>{_PART}(?:\.{_PART}){{0,2}})", re.IGNORECASE)


def _missing(error: str) -> tuple[str, str] | None:
    """(schema or "", table) of the relation DuckDB says does not exist."""
    found = _MISSING.search(error)
    if found is None:
        return None
    table = found["table"].strip('"')
    for read in _READ.finditer(error[found.end() :]):
        parts = [p.strip('"') for p in re.findall(_PART, read["rel"])]
        if parts[-1].lower() == table.lower() and len(parts) >= 2:
            return parts[-2], table
    return "", table


def built_after_read(error: str, db_snapshot: Path | None, notes: list[str]) -> str:
    """`schema.table` when the relation the error says is missing is in the warehouse the run
    left (DuckDB); else ""."""
    missing = _missing(error)
    if missing is None or db_snapshot is None or not db_snapshot.is_file():
        return ""
    schema, table = missing
    if not schema:
        return ""  # an unqualified name may mean another schema than the one holding it now
    try:
        import duckdb
    except ImportError:
        return ""
    sql = (
        "select table_schema from information_schema.tables"
        " where lower(table_name) = lower(?) and lower(table_schema) = lower(?)"
    )
    args = [table, schema]
    try:
        with duckdb.connect(str(db_snapshot), read_only=True) as con:
            rows = con.execute(sql, args).fetchall()
    except duckdb.Error as exc:
        notes.append(f"could not look for {table} in the warehouse: {str(exc).splitlines()[0]}")
        return ""
    if len(rows) != 1:
        return ""  # not there, or in several schemas: which one the unit read is not known
    return f"{rows[0][0]}.{table}"


_PG_MISSING = re.compile(r'relation "(?P<rel>[^"]+)" does not exist')


def built_after_read_pg(error: str, output: dict[str, Any] | None, notes: list[str]) -> str:
    """`schema.table` when the relation Postgres said does not exist is in the user's database
    now (the run left it there); else ""."""
    found = _PG_MISSING.search(error)
    if found is None or output is None:
        return ""
    from patchit.evidence.pg_columns import pg_upstream_columns

    schema, _, table = found["rel"].rpartition(".")
    if not schema:
        return ""  # an unqualified name may mean another schema than the one holding it now
    node = {"schema": schema.rpartition(".")[2]}
    got = pg_upstream_columns(output, [("missing", node, table)], notes)
    if "missing" not in got:
        return ""
    return got["missing"][0].split(".", 1)[1]  # database.schema.table -> schema.table

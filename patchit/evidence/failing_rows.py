"""A sample of the rows a failing data test found, read from the warehouse snapshot.

The test's compiled SQL is run read-only against the incident's copy of the database (never the
user's file), so a report on a `not_null`/`unique` failure shows the offending rows. On a
Postgres target there is no copy: the query runs on the user's database in a read-only
transaction with a `statement_timeout`, at most `limit` rows (`sample_failing_rows_pg`); on
Snowflake likewise, inside a select, with the session's statement timeout
(`sample_failing_rows_sf`). A test
that selects only the tested column from one relation (`not_null`, many singular tests) is
widened to the whole row, and the sample keeps the row's key columns (`id`, `*_id`) first, so
a reader can find the row: `| customer_id | country |`, not `| country |`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchit.errors import PatchitError

SAMPLE_ROWS = 5
SAMPLE_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5  # the profile's own connect_timeout wins
MAX_COLUMNS = 6


def sample_failing_rows(
    compiled_sql: str,
    db_snapshot: Path,
    limit: int = SAMPLE_ROWS,
    timeout_s: float = SAMPLE_TIMEOUT_S,
    column: str | None = None,
) -> tuple[list[dict[str, str]], str | None]:
    """Up to `limit` rows of the test query, as strings; (rows, note when it could not run).
    With the tested `column` known, whole rows where the query allows it, keys first."""
    return _widened(
        compiled_sql, column, "duckdb", lambda sql: _sample(sql, db_snapshot, limit, timeout_s)
    )


def sample_failing_rows_pg(
    compiled_sql: str,
    output: dict[str, Any],
    limit: int = SAMPLE_ROWS,
    timeout_s: float = SAMPLE_TIMEOUT_S,
    column: str | None = None,
) -> tuple[list[dict[str, str]], str | None]:
    """`sample_failing_rows` on the Postgres database of dbt profile `output`: read-only, at
    most `limit` rows, each statement stopped after `timeout_s`."""
    from patchit.sandbox.postgres import PgWarehouse

    timeout = output.get("connect_timeout") or CONNECT_TIMEOUT_S
    warehouse = PgWarehouse({**output, "connect_timeout": timeout}, purpose="failing rows")
    try:
        return _widened(
            compiled_sql, column, "postgres",
            lambda sql: _sample_pg(sql, warehouse, limit, timeout_s),
        )  # fmt: skip
    finally:
        warehouse.close()


def sample_failing_rows_sf(
    compiled_sql: str,
    output: dict[str, Any],
    limit: int = SAMPLE_ROWS,
    timeout_s: float = SAMPLE_TIMEOUT_S,
    column: str | None = None,
) -> tuple[list[dict[str, str]], str | None]:
    """`sample_failing_rows` on the Snowflake database of dbt profile `output`: the test's
    query inside a select (which cannot write), at most `limit` rows, stopped after
    `timeout_s` (the session's STATEMENT_TIMEOUT_IN_SECONDS)."""
    from patchit.sandbox.snowflake import SfWarehouse

    warehouse = SfWarehouse({**output, "login_timeout": CONNECT_TIMEOUT_S}, purpose="failing rows")
    try:
        return _widened(
            compiled_sql, column, "snowflake",
            lambda sql: _sample_sf(sql, warehouse, limit, timeout_s),
        )  # fmt: skip
    finally:
        warehouse.close()


Sample = tuple[list[dict[str, str]], str | None]


def _widened(sql: str, column: str | None, dialect: str, run: Callable[[str], Sample]) -> Sample:
    sql = sql.strip().rstrip(";")
    wide = whole_rows(sql, dialect) if column else None
    if wide is not None and column:
        rows, note = run(wide)
        if note is None and rows and any(k.lower() == column.lower() for k in rows[0]):
            return [_keyed(row, column) for row in rows], None
    return run(sql)


def whole_rows(sql: str, dialect: str = "duckdb") -> str | None:
    """The query with `*` for its columns, when it is one plain select from one relation (no
    grouping, aggregate, join, set operation or distinct); else None."""
    try:
        import sqlglot
        from sqlglot import exp
    except ImportError:
        return None
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return None

    def part(name: str) -> object:  # sqlglot names some parts with a trailing `_`
        return tree.args.get(name) or tree.args.get(f"{name}_")

    if not isinstance(tree, exp.Select) or part("with"):
        return None
    if any(part(k) for k in ("group", "having", "joins", "distinct", "qualify")):
        return None
    if any(e.find(exp.AggFunc, exp.Window) for e in tree.expressions):
        return None
    if part("from") is None:
        return None
    wide = tree.copy()
    wide.set("expressions", [exp.Star()])
    try:
        return str(wide.sql(dialect=dialect))
    except RecursionError:  # parsed, but too deep for sqlglot's generator
        return None


def _keyed(row: dict[str, str], column: str) -> dict[str, str]:
    """The row's key columns, the tested column, then others, at most MAX_COLUMNS."""
    names = list(row)
    keys = [n for n in names if n.lower() == "id" or n.lower().endswith("_id")][:2] or names[:1]
    tested = [n for n in names if n.lower() == column.lower()]
    order = list(dict.fromkeys([*keys, *tested, *names]))[: max(MAX_COLUMNS, len(keys) + 1)]
    return {n: row[n] for n in order}


def _sample(
    sql: str, db_snapshot: Path, limit: int, timeout_s: float
) -> tuple[list[dict[str, str]], str | None]:
    try:
        import duckdb
    except ImportError:
        return [], "duckdb is not installed; failing rows not sampled"
    try:
        with duckdb.connect(str(db_snapshot), read_only=True) as con:
            # a test query over a big table must not stall the heal: interrupt it
            timer = threading.Timer(timeout_s, con.interrupt)
            timer.start()
            try:
                cursor = con.execute(f"select * from ({sql}) as failing limit {int(limit)}")
                names = [d[0] for d in cursor.description or []]
                rows = cursor.fetchall()
            finally:
                timer.cancel()
            return _strings(names, rows), None
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [], f"failing rows not sampled: {first}"


def _strings(names: list[str], rows: list[tuple[Any, ...]]) -> list[dict[str, str]]:
    return [
        {n: "NULL" if v is None else str(v) for n, v in zip(names, row, strict=True)}
        for row in rows
    ]


def _sample_pg(sql: str, warehouse: Any, limit: int, timeout_s: float) -> Sample:
    try:
        names, rows = warehouse.sample(sql, limit, timeout_s)
    except PatchitError as exc:
        return [], f"failing rows not sampled: {exc}"
    return _strings(names, rows), None


def _sample_sf(sql: str, warehouse: Any, limit: int, timeout_s: float) -> Sample:
    try:
        with contextlib.suppress(PatchitError):  # the emulator knows no session parameters
            warehouse.query(f"alter session set statement_timeout_in_seconds = "
                            f"{max(1, int(timeout_s))}")  # fmt: skip
        names, rows = warehouse.query_with_columns(
            f"select * from ({sql}) as failing limit {int(limit)}"
        )
    except PatchitError as exc:
        return [], f"failing rows not sampled: {exc}"
    return _strings(names, rows), None

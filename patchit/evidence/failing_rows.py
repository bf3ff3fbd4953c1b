"""A sample of the rows a failing data test found, read from the warehouse snapshot.

The test's compiled SQL is run read-only against the incident's copy of the database (never the
user's file), so a report on a `not_null`/`unique` failure shows the offending rows.
"""

from __future__ import annotations

import threading
from pathlib import Path

SAMPLE_ROWS = 5
SAMPLE_TIMEOUT_S = 10.0


def sample_failing_rows(
    compiled_sql: str,
    db_snapshot: Path,
    limit: int = SAMPLE_ROWS,
    timeout_s: float = SAMPLE_TIMEOUT_S,
) -> tuple[list[dict[str, str]], str | None]:
    """Up to `limit` rows of the test query, as strings; (rows, note when it could not run)."""
    try:
        import duckdb
    except ImportError:
        return [], "duckdb is not installed; failing rows not sampled"
    sql = compiled_sql.strip().rstrip(";")
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
            return [
                {n: "NULL" if v is None else str(v) for n, v in zip(names, row, strict=True)}
                for row in rows
            ], None
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [], f"failing rows not sampled: {first}"

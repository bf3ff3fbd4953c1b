"""The zero-copy clones of the Snowflake sandbox, as SQL: `at(timestamp => ...)` freezes a
clone at the failing run's start (Snowflake's time travel), in UTC whatever zone the time
came in. The emulator has no time travel (tests/test_snowflake.py: the clone falls back to
the table as it is, and says so)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from patchit.sandbox.snowflake import clone_sql

DEST, SOURCE = '"DB"."PATCHIT_X_C1"."ORDER_LOG"', '"DB"."ANALYTICS"."ORDER_LOG"'


def test_without_a_moment_the_clone_is_of_the_table_as_it_is() -> None:
    assert clone_sql(DEST, SOURCE, None) == f"create table {DEST} clone {SOURCE}"


def test_a_clone_at_the_failing_runs_start_names_the_moment_in_utc() -> None:
    started = datetime(2026, 11, 29, 4, 5, 6, 789000, tzinfo=timezone(timedelta(hours=2)))
    sql = clone_sql(DEST, SOURCE, started)
    assert sql == (
        f"create table {DEST} clone {SOURCE} at(timestamp => to_timestamp_tz("
        "'2026-11-29 02:05:06.789000 +00:00', 'YYYY-MM-DD HH24:MI:SS.FF6 TZH:TZM'))"
    )


def test_a_naive_moment_is_read_as_utc() -> None:
    naive = clone_sql(DEST, SOURCE, datetime(2026, 1, 2, 3, 4, 5))
    aware = clone_sql(DEST, SOURCE, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert naive == aware and "'2026-01-02 03:04:05.000000 +00:00'" in naive

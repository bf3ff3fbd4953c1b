"""Postgres errors as real dbt 1.11.16 / dbt-postgres 1.10.2 on PostgreSQL 15 reports them
(run_results.json `message`, or the "Encountered an error" block), on copies of
patchit/examples/shop broken one way each; the data and connection errors are the server's own
text, as dbt wraps it. Classified like their DuckDB counterparts."""

from __future__ import annotations

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from tests.classify.test_classifier import ORDERS, _evidence

DAILY = "models/marts/daily_revenue.sql"


def _db_error(model: str, path: str, *lines: str) -> str:
    body = "".join(f"\n  {line}" for line in lines)
    return (
        f"Database Error in model {model} ({path}){body}\n  compiled code at target/run/shop/{path}"
    )


COLUMN = _db_error(
    "daily_revenue", DAILY,
    'column "amont" does not exist',
    "LINE 15:     sum(amont) as revenue",
    "                 ^",
    'HINT:  Perhaps you meant to reference the column "orders.amount".',
)  # fmt: skip
QUALIFIED_COLUMN = _db_error(
    "orders", ORDERS,
    "column o.stauts does not exist",
    "LINE 16:     o.stauts,",
    "             ^",
    'HINT:  Perhaps you meant to reference the column "o.status".',
)  # fmt: skip
RELATION = _db_error(
    "daily_revenue", DAILY,
    'relation "analytics.ordrs" does not exist',
    "LINE 16: from analytics.ordrs",
    "              ^",
)  # fmt: skip
FOREIGN_RELATION = _db_error(
    "daily_revenue", DAILY,
    'relation "erp.invoice_lines" does not exist',
    "LINE 16: from erp.invoice_lines",
    "              ^",
)  # fmt: skip
FUNCTION = _db_error(
    "daily_revenue", DAILY,
    "function summ(numeric) does not exist",
    "LINE 15:     summ(amount) as revenue",
    "             ^",
    "HINT:  No function matches the given name and argument types. You might need to add "
    "explicit type casts.",
)  # fmt: skip
SYNTAX = _db_error(
    "daily_revenue", DAILY,
    'syntax error at or near "order_date"',
    "LINE 18: group order_date",
    "               ^",
)  # fmt: skip
QUALIFIER = _db_error(
    "orders", ORDERS,
    'missing FROM-clause entry for table "x"',
    "LINE 16:     x.status,",
    "             ^",
)  # fmt: skip
GROUP_BY = _db_error(
    "daily_revenue", DAILY,
    'column "orders.status" must appear in the GROUP BY clause or be used in an aggregate '
    "function",
    "LINE 15:     cast(status as integer) as revenue",
    "                  ^",
)  # fmt: skip
DIVISION = _db_error("daily_revenue", DAILY, "division by zero")
NOT_NULL = _db_error(
    "orders", ORDERS,
    'null value in column "v" of relation "t" violates not-null constraint',
    "DETAIL:  Failing row contains (1, null, a).",
)  # fmt: skip
UNIQUE = _db_error(
    "orders", ORDERS,
    'duplicate key value violates unique constraint "t_pkey"',
    "DETAIL:  Key (id)=(1) already exists.",
)  # fmt: skip
BAD_INPUT = _db_error(
    "orders", ORDERS,
    'invalid input syntax for type integer: "abc"',
    "LINE 1: select cast('abc' as integer)",
    "                    ^",
)  # fmt: skip
TOO_LONG = _db_error("orders", ORDERS, "value too long for type character varying(3)")
REFUSED = (
    "Database Error\n"
    '  connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
    "  \tIs the server running on that host and accepting TCP/IP connections?\n  "
)
NO_ROLE = (
    "Database Error\n"
    '  connection to server at "127.0.0.1", port 35029 failed: FATAL:  role "nobody" does not '
    "exist\n  "
)
PASSWORD = (
    "Database Error\n"
    '  connection to server at "db.internal" (10.0.0.5), port 5432 failed: FATAL:  password '
    'authentication failed for user "dbt"\n  '
)
TOO_MANY = (
    "Database Error\n"
    '  connection to server at "127.0.0.1", port 44859 failed: FATAL:  sorry, too many clients '
    "already\n  "
)
DEADLOCK = _db_error(
    "orders", ORDERS,
    "deadlock detected",
    "DETAIL:  Process 4242 waits for AccessExclusiveLock on relation 16384 of database 5; "
    "blocked by process 4243.",
)  # fmt: skip
LOCK_TIMEOUT = _db_error("orders", ORDERS, "canceling statement due to lock timeout")
STATEMENT_TIMEOUT = _db_error("orders", ORDERS, "canceling statement due to statement timeout")

C = FailureClass
CASES: list[tuple[str, str, tuple[str, ...], FailureClass, str]] = [
    # (case, message, changed files, class, signature)
    ("missing column, changed", COLUMN, (DAILY,), C.CODE_BUG, "sql_error"),
    ("missing column, unchanged", COLUMN, (), C.CODE_BUG, "sql_error"),
    ("qualified missing column", QUALIFIED_COLUMN, (ORDERS,), C.CODE_BUG, "sql_error"),
    ("relation typo", RELATION, (DAILY,), C.CODE_BUG, "catalog_error_project"),
    ("foreign relation", FOREIGN_RELATION, (), C.ENV_MISMATCH, "catalog_error_external"),
    ("function typo", FUNCTION, (DAILY,), C.CODE_BUG, "sql_error"),
    ("syntax error", SYNTAX, (DAILY,), C.CODE_BUG, "sql_error"),
    ("qualifier typo", QUALIFIER, (ORDERS,), C.CODE_BUG, "sql_error"),
    ("group by", GROUP_BY, (DAILY,), C.CODE_BUG, "sql_error"),
    ("division by zero, sql unchanged", DIVISION, (), C.DATA_ISSUE, "pg_data"),
    ("division by zero, sql changed", DIVISION, (DAILY,), C.CODE_BUG, "pg_data_code_changed"),
    ("not null, sql unchanged", NOT_NULL, (), C.DATA_ISSUE, "pg_data"),
    ("unique, sql unchanged", UNIQUE, (), C.DATA_ISSUE, "pg_data"),
    ("unique, sql changed", UNIQUE, (ORDERS,), C.CODE_BUG, "pg_data_code_changed"),
    ("bad cast input", BAD_INPUT, (), C.DATA_ISSUE, "pg_data"),
    ("too long", TOO_LONG, (), C.DATA_ISSUE, "pg_data"),
    ("connection refused", REFUSED, (), C.INFRA_ISSUE, "connection_failed"),
    ("no such role", NO_ROLE, (), C.INFRA_ISSUE, "auth_rejected"),
    ("password", PASSWORD, (), C.INFRA_ISSUE, "auth_rejected"),
    ("too many clients", TOO_MANY, (), C.INFRA_ISSUE, "too_many_connections"),
    ("deadlock", DEADLOCK, (ORDERS,), C.INFRA_ISSUE, "lock_conflict"),
    ("lock timeout", LOCK_TIMEOUT, (), C.INFRA_ISSUE, "lock_conflict"),
    ("statement timeout", STATEMENT_TIMEOUT, (), C.INFRA_ISSUE, "timeout"),
]


@pytest.mark.parametrize(
    ("message", "changed", "cls", "signature"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_postgres_errors_are_classified(
    message: str, changed: tuple[str, ...], cls: FailureClass, signature: str
) -> None:
    path = DAILY if "daily_revenue" in message else ORDERS
    uid = "model.shop." + path.rpartition("/")[2].removesuffix(".sql")
    verdict = classify_failure(
        _evidence(
            message, unit_id=uid, unit_path=path, changed=changed, error_type="Database Error"
        )
    )
    assert (verdict.cls, verdict.signature) == (cls, signature), verdict.reason


def test_the_reason_cites_the_postgres_line_not_dbt_wrapper() -> None:
    verdict = classify_failure(
        _evidence(COLUMN, unit_id="model.shop.daily_revenue", unit_path=DAILY, changed=(DAILY,))
    )
    assert '(column "amont" does not exist)' in verdict.reason
    assert "models/marts/daily_revenue.sql changed since" in verdict.reason


def test_a_relation_far_from_every_project_name_is_not_the_project() -> None:
    far = RELATION.replace("analytics.ordrs", "analytics.ledger_entries")
    verdict = classify_failure(_evidence(far, unit_id="model.shop.daily_revenue", unit_path=DAILY))
    assert verdict.cls is C.ENV_MISMATCH


def test_python_zero_division_in_a_dbt_python_model_is_not_a_warehouse_value() -> None:
    message = "Runtime Error in model orders\n  ZeroDivisionError: division by zero"
    verdict = classify_failure(_evidence(message, changed=(ORDERS,)))
    assert verdict.signature not in ("pg_data", "pg_data_code_changed")

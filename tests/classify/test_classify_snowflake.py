"""Snowflake errors, written from Snowflake's documented messages as dbt-snowflake wraps them
(`Database Error in model ...`, the code and SQLSTATE, the server's text), and the local
emulator's (fakesnow: DuckDB's words under Snowflake's codes, as the slow tests see them).
Classified like their DuckDB and Postgres counterparts."""

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


IDENTIFIER = _db_error(
    "daily_revenue", DAILY,
    "000904 (42000): SQL compilation error: error line 4 at position 8",
    "invalid identifier 'AMONT'",
)  # fmt: skip
QUALIFIED_IDENTIFIER = _db_error(
    "orders", ORDERS,
    "000904 (42000): SQL compilation error: error line 16 at position 4",
    "invalid identifier 'O.STAUTS'",
)  # fmt: skip
OBJECT = _db_error(
    "daily_revenue", DAILY,
    "002003 (42S02): SQL compilation error:",
    "Object 'ANALYTICS.JAFFLE.ORDRS' does not exist or not authorized.",
)  # fmt: skip
FOREIGN_OBJECT = _db_error(
    "daily_revenue", DAILY,
    "002003 (42S02): SQL compilation error:",
    "Object 'RAW.ERP.INVOICE_LINES' does not exist or not authorized.",
)  # fmt: skip
SYNTAX = _db_error(
    "daily_revenue", DAILY,
    "001003 (42000): SQL compilation error:",
    "syntax error line 5 at position 6 unexpected 'order_date'.",
)  # fmt: skip
NUMERIC = _db_error("orders", ORDERS, "100038 (22018): Numeric value 'abc' is not recognized")
WAREHOUSE = (
    "Database Error\n  000606 (57P03): Warehouse 'TRANSFORMING' cannot be resumed because "
    "resource monitor 'MONTHLY' has exceeded its quota.\n  "
)
NO_WAREHOUSE = _db_error(
    "orders", ORDERS,
    "000606 (57P03): No active warehouse selected in the current session.  Select an active "
    "warehouse with the 'use warehouse' command.",
)  # fmt: skip
PRIVILEGES = _db_error(
    "orders", ORDERS, "003001 (42501): Insufficient privileges to operate on schema 'MARTS'"
)
ACCESS_CONTROL = _db_error(
    "orders", ORDERS,
    "003001 (42501): SQL access control error:",
    "Insufficient privileges to operate on table 'ORDERS'",
)  # fmt: skip
PASSWORD = (
    "Database Error\n  250001 (08001): Failed to connect to DB: xy12345.snowflakecomputing.com:443."
    " Incorrect username or password was specified.\n  "
)
# The emulator's words (fakesnow 0.12, as dbt-snowflake reports them in the slow tests)
EMULATED_COLUMN = _db_error(
    "daily_revenue", DAILY,
    '002043 (02000): Binder Error: Referenced column "AMONT" not found in FROM clause!',
    'Candidate bindings: "AMOUNT", "STATUS", "ORDER_DATE", "CUSTOMER_ID"',
)  # fmt: skip
EMULATED_TABLE = _db_error(
    "daily_revenue", DAILY,
    '002003 (42S02): Catalog Error: Table with name ORDRS does not exist!',
    'Did you mean "ANALYTICS.ORDERS"?',
)  # fmt: skip
# what the emulator's parser (sqlglot) says of a select item without its comma
EMULATED_SYNTAX = _db_error(
    "daily_revenue", DAILY,
    "001003 (42000): Expecting ). Line 14, Col: 7.",
    "  create or replace transient table SHOP.analytics.daily_revenue",
)  # fmt: skip

C = FailureClass
CASES: list[tuple[str, str, tuple[str, ...], FailureClass, str]] = [
    # (case, message, changed files, class, signature)
    ("invalid identifier", IDENTIFIER, (DAILY,), C.CODE_BUG, "sql_error"),
    ("invalid qualified identifier", QUALIFIED_IDENTIFIER, (ORDERS,), C.CODE_BUG, "sql_error"),
    ("object typo", OBJECT, (DAILY,), C.CODE_BUG, "catalog_error_project"),
    ("foreign object", FOREIGN_OBJECT, (), C.ENV_MISMATCH, "catalog_error_external"),
    ("syntax error", SYNTAX, (DAILY,), C.CODE_BUG, "sql_error"),
    ("numeric value, sql unchanged", NUMERIC, (), C.DATA_ISSUE, "conversion_data"),
    ("numeric value, sql changed", NUMERIC, (ORDERS,), C.CODE_BUG, "conversion_code_changed"),
    ("warehouse quota", WAREHOUSE, (), C.INFRA_ISSUE, "warehouse_unavailable"),
    ("no warehouse", NO_WAREHOUSE, (ORDERS,), C.INFRA_ISSUE, "warehouse_unavailable"),
    ("insufficient privileges", PRIVILEGES, (ORDERS,), C.INFRA_ISSUE, "permission_denied"),
    ("access control", ACCESS_CONTROL, (), C.INFRA_ISSUE, "permission_denied"),
    ("password", PASSWORD, (), C.INFRA_ISSUE, "auth_rejected"),
    ("emulator: column", EMULATED_COLUMN, (DAILY,), C.CODE_BUG, "sql_error"),
    ("emulator: table", EMULATED_TABLE, (DAILY,), C.CODE_BUG, "catalog_error_project"),
    ("emulator: syntax", EMULATED_SYNTAX, (DAILY,), C.CODE_BUG, "sql_error"),
]


@pytest.mark.parametrize(
    ("message", "changed", "cls", "signature"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_snowflake_errors_are_classified(
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


def test_the_reason_cites_snowflakes_line() -> None:
    verdict = classify_failure(
        _evidence(IDENTIFIER, unit_id="model.shop.daily_revenue", unit_path=DAILY, changed=(DAILY,))
    )
    assert "invalid identifier 'AMONT'" in verdict.reason

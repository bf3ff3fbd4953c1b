"""The check of `[sandbox] sf_role`'s grants (`patchit.sandbox.sf_grants`) on the rows real
Snowflake's `show grants to role` and `show future grants to role` return (their columns as
Snowflake's documentation gives them; the emulator the slow tests run on has no grants)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from patchit.errors import HarnessError
from patchit.sandbox.pg_role import CannotVerifySafely
from patchit.sandbox.sf_grants import EMULATOR_NOTE, Grant, check_sf_role, judge_grant, unsafe_grant

WHEN = datetime(2026, 1, 15, 9, 0)


def _row(privilege: str, kind: str, name: str, role: str = "PATCHIT_SANDBOX") -> dict[str, Any]:
    return {"created_on": WHEN, "privilege": privilege, "granted_on": kind, "name": name,
            "granted_to": "ROLE", "grantee_name": role, "grant_option": "false",
            "granted_by": "SECURITYADMIN"}  # fmt: skip


def _future(privilege: str, kind: str, name: str) -> dict[str, Any]:
    return {"created_on": WHEN, "privilege": privilege, "grant_on": kind, "name": name,
            "grant_to": "ROLE", "grantee_name": "PATCHIT_SANDBOX"}  # fmt: skip


# what `patchit doctor`'s fix makes, and the schemas the role made
MADE = [
    _row("USAGE", "WAREHOUSE", "TRANSFORMING"),
    _row("OPERATE", "WAREHOUSE", "TRANSFORMING"),
    _row("USAGE", "DATABASE", "ANALYTICS"),
    _row("CREATE SCHEMA", "DATABASE", "ANALYTICS"),
    _row("USAGE", "SCHEMA", "ANALYTICS.JAFFLE"),
    _row("SELECT", "TABLE", "ANALYTICS.JAFFLE.ORDERS"),
    _row("SELECT", "VIEW", "ANALYTICS.JAFFLE.STG_ORDERS"),
    _row("OWNERSHIP", "SCHEMA", "ANALYTICS.PATCHIT_INC7_C1"),
    _row("OWNERSHIP", "TABLE", "ANALYTICS.PATCHIT_INC7_C1.DAILY_REVENUE"),
    _row("USAGE", "FUNCTION", 'ANALYTICS.JAFFLE."CENTS_TO_DOLLARS(AMOUNT NUMBER):NUMBER(38,2)"'),
]


def _show(grants: dict[str, list[dict[str, Any]]], future: dict[str, list[dict[str, Any]]]) -> Any:
    def show(sql: str) -> list[dict[str, Any]]:
        role = sql.rsplit(" ", 1)[1].strip('"')
        return (future if sql.startswith("show future") else grants).get(role, [])

    return show


def test_a_role_made_as_doctor_says_passes() -> None:
    assert unsafe_grant("patchit_sandbox", _show({"PATCHIT_SANDBOX": MADE}, {})) is None


@pytest.mark.parametrize(
    ("grant", "named"),
    [
        (_row("INSERT", "TABLE", "ANALYTICS.JAFFLE.ORDERS"), "INSERT on table"),
        (_row("OWNERSHIP", "TABLE", "ANALYTICS.JAFFLE.ORDERS"), "OWNERSHIP on table"),
        (_row("CREATE TABLE", "SCHEMA", "ANALYTICS.JAFFLE"), "CREATE TABLE on schema"),
        (_row("MODIFY", "DATABASE", "ANALYTICS"), "MODIFY on database ANALYTICS"),
        (_row("MANAGE GRANTS", "ACCOUNT", "PATCHIT"), "MANAGE GRANTS on account"),
        (_row("USAGE", "PROCEDURE", 'ANALYTICS.JAFFLE."RELOAD():VARCHAR"'), "on procedure"),
        (_row("USAGE", "ROLE", "SYSADMIN"), "USAGE on role SYSADMIN"),
        (_row("APPLY", "MASKING POLICY", "ANALYTICS.JAFFLE.PII"), "APPLY on masking policy"),
    ],
)
def test_a_grant_that_may_write_the_users_data_is_named(grant: dict[str, Any], named: str) -> None:
    found = unsafe_grant("PATCHIT_SANDBOX", _show({"PATCHIT_SANDBOX": [*MADE, grant]}, {}))
    assert found is not None and named in found.describe(), found


def test_an_inherited_roles_and_future_grants_count() -> None:
    reads = _row("SELECT", "TABLE", "ANALYTICS.JAFFLE.ORDERS", "REPORTER")
    grants = {"PATCHIT_SANDBOX": [*MADE, _row("USAGE", "ROLE", "REPORTER")], "REPORTER": [reads]}
    assert unsafe_grant("PATCHIT_SANDBOX", _show(grants, {})) is None
    future = {"REPORTER": [_future("INSERT", "TABLE", "ANALYTICS.JAFFLE.<TABLE>")]}
    found = unsafe_grant("PATCHIT_SANDBOX", _show(grants, future))
    assert found is not None
    said = found.describe()
    assert said == "INSERT on future tables in ANALYTICS.JAFFLE.<TABLE> (through role REPORTER)"


def test_a_sandbox_schema_is_the_roles_but_a_user_schema_is_not() -> None:
    assert judge_grant(Grant("OWNERSHIP", "SCHEMA", "ANALYTICS.PATCHIT_INC7_C1_STAGING", "R"))
    assert judge_grant(Grant("OWNERSHIP", "DATABASE", "PATCHIT_INC7", "R"))
    assert not judge_grant(Grant("OWNERSHIP", "SCHEMA", "ANALYTICS.JAFFLE", "R"))
    assert not judge_grant(Grant("INSERT", "TABLE", '"analytics"."Jaffle".ORDERS', "R"))
    assert not judge_grant(Grant("OWNERSHIP", "NOTEBOOK", "ANALYTICS.JAFFLE.NB", "R"))  # unknown


class _Server:
    """A connection whose SHOW GRANTS fails, as `SfWarehouse` reports it, and whose current
    role is `role`."""

    def __init__(self, role: str, error: str) -> None:
        self.role, self.error = role, error

    def query_with_columns(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        raise HarnessError(f"the check of [sandbox] sf_role's grants: {self.error}")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return [(self.role,)]


PARSER = '001003 (42000): Parser Error: syntax error at or near "to"'


def test_grants_that_cannot_be_read_stop_the_heal_except_on_the_emulator() -> None:
    assert check_sf_role(_Server("duckdb", PARSER), "PATCHIT_SANDBOX") == EMULATOR_NOTE
    for server in (_Server("SYSADMIN", PARSER),
                   _Server("duckdb", "003001 (42501): SQL access control error: Insufficient "
                           "privileges to operate on role 'PATCHIT_SANDBOX'")):  # fmt: skip
        unread = r"on Snowflake: the grants of \[sandbox\] sf_role PATCHIT_SANDBOX cannot be read"
        with pytest.raises(CannotVerifySafely, match=unread):
            check_sf_role(server, "PATCHIT_SANDBOX")


class _Rows:
    """A connection answering SHOW GRANTS with documented rows, by role."""

    def __init__(self, grants: dict[str, list[dict[str, Any]]]) -> None:
        self.show = _show(grants, {})

    def query_with_columns(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        rows = self.show(sql)
        columns = list(rows[0]) if rows else ["privilege"]
        return columns, [tuple(r[c] for c in columns) for r in rows]


def test_a_database_of_patchits_own_needs_create_database_on_the_account() -> None:
    from patchit.sandbox.sf_grants import may_create_database

    assert may_create_database(_Rows({"PATCHIT_SANDBOX": MADE}), "patchit_sandbox") is False
    direct = [*MADE, _row("CREATE DATABASE", "ACCOUNT", "XY12345")]
    assert may_create_database(_Rows({"PATCHIT_SANDBOX": direct}), "PATCHIT_SANDBOX") is True
    inherited = {"PATCHIT_SANDBOX": [*MADE, _row("USAGE", "ROLE", "CLONER")],
                 "CLONER": [_row("CREATE DATABASE", "ACCOUNT", "XY12345", "CLONER")]}  # fmt: skip
    assert may_create_database(_Rows(inherited), "PATCHIT_SANDBOX") is True
    assert may_create_database(_Server("duckdb", PARSER), "PATCHIT_SANDBOX") is None

"""`patchit doctor`'s line for a Snowflake dbt target: whether it is reachable with the
profile's credentials (a 5 s login), and where candidates would be verified: sandbox schemas
`PATCHIT_<incident>_<n>` of the profile's database (the role needs `CREATE SCHEMA` on it), the
upstream read through `--defer`, incremental models built on zero-copy clones of the user's
tables, as the operator's `[sandbox] sf_role` (without it nothing is verified: candidate SQL
would run as the profile's role, which may write the user's schemas). The role's grants are
read (`patchit.sandbox.sf_grants`): one that may write the user's data fails, named; with
`[sandbox] sf_database = "auto"`, whether it holds CREATE DATABASE on the account, which a
database of patchit's own needs (`patchit.sandbox.sf_database`). Whether the role may create
schemas or clone is not probed: that would create something, and doctor creates nothing; a
heal that may not says so in its report.
"""

from __future__ import annotations

from typing import Any

from patchit.doctor.doctor import Check
from patchit.errors import HarnessError

NAME = "dbt target"


def check_snowflake(
    where: str, output: dict[str, Any], sf_role: str | None = None, sf_database: str = "never"
) -> Check:
    from patchit.harnesses.dbt.sf import grants
    from patchit.sandbox.pg_role import CannotVerifySafely
    from patchit.sandbox.sf_grants import check_sf_role, may_create_database
    from patchit.sandbox.snowflake import SfWarehouse

    if sf_role is None:
        return Check(
            "warn", NAME,
            f"{where}: fixes are not verified: no [sandbox] sf_role (candidate SQL would run "
            "as the profile's role, which may write your schemas)",
            f"set [sandbox] sf_role in $PATCHIT_HOME/patchit.toml to a role made with: "
            f"{grants(output)}",
        )  # fmt: skip
    try:
        warehouse = SfWarehouse(
            {**output, "role": sf_role, "login_timeout": 5}, purpose="patchit doctor"
        )
    except HarnessError as exc:
        return Check("fail", NAME, f"{where}: {exc}", "fix the profile")
    try:
        [(database, role)] = warehouse.query("select current_database(), current_role()")
        grants_note = check_sf_role(warehouse, sf_role)
        creates = may_create_database(warehouse, sf_role) if sf_database == "auto" else False
    except CannotVerifySafely as exc:
        return Check("fail", NAME, f"{where}: fixes are not verified: {exc}",
                     f"give [sandbox] sf_role only: {grants(output, sf_role)}")  # fmt: skip
    except HarnessError as exc:
        return Check("fail", NAME, f"{where}: not reachable: {exc}",
                     "check the account, host and credentials of the profile")  # fmt: skip
    finally:
        warehouse.close()
    schemas = (f"sandbox schemas PATCHIT_<incident>_<n> of database {database} (the role "
               "needs CREATE SCHEMA there)")  # fmt: skip
    if sf_database != "auto":
        place = f'{schemas}; no database of patchit\'s own ([sandbox] sf_database = "never")'
    elif creates:
        place = (f"a zero-copy clone of database {database} per incident, PATCHIT_DB_<hex> "
                 "(the role may create a database), sandbox schemas in it")  # fmt: skip
    elif creates is None:
        place = (f"a zero-copy clone of database {database} per incident where the role "
                 f"may create a database (its grants not read), else {schemas}")  # fmt: skip
    else:
        place = (f"{schemas}: no database of patchit's own, the role may not create one "
                 "(grant create database on account to it for one)")  # fmt: skip
    return Check(
        "ok", NAME,
        f"{where}: reachable as [sandbox] sf_role {role} ({grants_note}); fixes are verified "
        f"in {place}, upstream read through --defer, incremental models built on zero-copy "
        "clones",
    )  # fmt: skip

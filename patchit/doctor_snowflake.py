"""`patchit doctor`'s line for a Snowflake dbt target: whether it is reachable with the
profile's credentials (a 5 s login), and where candidates would be verified: sandbox schemas
`PATCHIT_<incident>_<n>` of the profile's database (the role needs `CREATE SCHEMA` on it), the
upstream read through `--defer`, incremental models built on zero-copy clones of the user's
tables. Whether the role may create schemas or clone is not probed: that would create
something, and doctor creates nothing; a heal that may not says so in its report.
"""

from __future__ import annotations

from typing import Any

from patchit.doctor import Check
from patchit.errors import HarnessError

NAME = "dbt target"


def check_snowflake(where: str, output: dict[str, Any]) -> Check:
    from patchit.sandbox.snowflake import SfWarehouse

    try:
        warehouse = SfWarehouse({**output, "login_timeout": 5}, purpose="patchit doctor")
    except HarnessError as exc:
        return Check("fail", NAME, f"{where}: {exc}", "fix the profile")
    try:
        [(database, role)] = warehouse.query("select current_database(), current_role()")
    except HarnessError as exc:
        return Check("fail", NAME, f"{where}: not reachable: {exc}",
                     "check the account, host and credentials of the profile")  # fmt: skip
    finally:
        warehouse.close()
    return Check(
        "ok", NAME,
        f"{where}: reachable as role {role}; fixes are verified in sandbox schemas "
        f"PATCHIT_<incident>_<n> of database {database} (the role needs CREATE SCHEMA there), "
        "upstream read through --defer, incremental models built on zero-copy clones; no "
        "database of patchit's own yet",
    )  # fmt: skip

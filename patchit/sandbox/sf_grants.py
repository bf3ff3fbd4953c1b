"""Whether the operator's `[sandbox] sf_role` may write the user's schemas, read from the
role's grants before any candidate SQL runs as it.

Candidates' dbt runs as `[sandbox] sf_role` (`patchit.harnesses.dbt.sf`): a hook is any SQL,
so the role is the boundary, and a role that may write a relation of the user's (a DBA's
generous grant, an inherited SYSADMIN) would let a candidate write it. Before the first
candidate runs, `show grants to role <role>` and `show future grants to role <role>` are read,
and the roles granted to it likewise (a role has the privileges of the roles it is granted);
each grant is judged against what a read-only role needs, and the first that allows more
stops the heal: escalated "cannot verify safely on Snowflake", one line naming the grant.

What passes: anything on a sandbox schema (`PATCHIT_<incident>_<n>`: the role makes and owns
them) and on a database of patchit's own (`PATCHIT_...`); USAGE, SELECT, REFERENCES, MONITOR,
READ on the rest; CREATE SCHEMA on a database; CREATE DATABASE and monitoring on the account;
any privilege on a warehouse (compute, not data). The rest stops the heal, an owner's-rights
procedure's USAGE included (it writes as its owner), and any grant of a kind not listed here.

The emulator the tests run on (fakesnow 0.12) has no access control: its `show grants` does
not parse, and its `current_role()` is DuckDB's. There, and only there (both signs), the
grants are not read and the report says so; any other failure to read them stops the heal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from patchit.errors import HarnessError
from patchit.sandbox.pg_role import CannotVerifySafely
from patchit.sandbox.snowflake import SANDBOX_PREFIX, quote

CANNOT_SF = "cannot verify safely on Snowflake"
# roles that own or may grant what the account holds
ADMIN_ROLES = frozenset({"ACCOUNTADMIN", "SECURITYADMIN", "SYSADMIN", "ORGADMIN"})
READS = frozenset({"USAGE", "SELECT", "REFERENCES", "MONITOR", "READ", "REFERENCE_USAGE"})
ALLOWED: dict[str, frozenset[str]] = {
    "ACCOUNT": frozenset({"CREATE DATABASE", "MONITOR", "MONITOR USAGE", "MONITOR EXECUTION"}),
    "DATABASE": READS | {"CREATE SCHEMA"},
    "SCHEMA": READS,
    "PROCEDURE": frozenset(),  # USAGE runs it with its owner's rights, which may write
}
# kinds whose every privilege is harmless to the user's data
ANY_PRIVILEGE = frozenset({"WAREHOUSE", "COMPUTE_POOL"})
# kinds of a relation or object in a schema: read-only there, anything in a sandbox schema
IN_SCHEMA = frozenset({
    "TABLE", "VIEW", "MATERIALIZED_VIEW", "EXTERNAL_TABLE", "DYNAMIC_TABLE", "EVENT_TABLE",
    "ICEBERG_TABLE", "HYBRID_TABLE", "STAGE", "FUNCTION", "SEQUENCE", "FILE_FORMAT", "STREAM",
    "TASK", "PIPE", "TAG", "MASKING_POLICY", "ROW_ACCESS_POLICY", "SECRET", "ALERT",
})  # fmt: skip
EMULATOR_NOTE = "its grants not read: the emulator (fakesnow) has no access control"
_MAX_ROLES = 50


@dataclass(frozen=True)
class Grant:
    """One row of `show [future] grants to role`: `privilege` on `kind` `name`."""

    privilege: str
    kind: str
    name: str
    role: str  # the role it was granted to (the checked one, or one it inherits)
    future: bool = False

    def describe(self) -> str:
        on = f"future {self.kind.lower()}s in" if self.future else self.kind.lower()
        via = f" (through role {self.role})"
        return f"{self.privilege} on {on} {self.name}{via}"


def _parts(name: str) -> list[str]:
    """`DB.SCHEMA.TABLE` (each part maybe quoted) split into its parts, unquoted."""
    return [p.strip('"') for p in re.findall(r'"(?:[^"]|"")*"|[^.]+', name)]


def _is_patchits(name: str, kind: str) -> bool:
    """A sandbox schema (or something in one), or a database of patchit's own."""
    parts = _parts(name)
    if kind == "DATABASE":
        return parts[0].upper().startswith(SANDBOX_PREFIX)
    schema = parts[1] if len(parts) > 1 else ""
    return bool(schema) and schema.upper().startswith(SANDBOX_PREFIX)


def judge_grant(grant: Grant) -> bool:
    """True when `grant` lets its holder write nothing of the user's."""
    privilege, kind = grant.privilege.upper(), grant.kind.upper().replace(" ", "_")
    if kind in ANY_PRIVILEGE:
        return True
    if kind == "ROLE":
        return grant.name.strip('"').upper() not in ADMIN_ROLES  # its grants are read too
    in_patchits = kind != "ACCOUNT" and (kind in ALLOWED or kind in IN_SCHEMA)
    if in_patchits and _is_patchits(grant.name, kind):  # it made it, or patchit's database
        return True
    if kind in ALLOWED:
        return privilege in ALLOWED[kind]
    if kind in IN_SCHEMA:
        return privilege in READS
    return False  # a kind not judged here: not assumed harmless


def unsafe_grant(role: str, show: Callable[[str], list[dict[str, Any]]]) -> Grant | None:
    """The first grant of `role` (or a role it inherits) that may write the user's data;
    None when there is none. `show(sql)` runs a SHOW command, its rows as dicts by column."""
    seen: set[str] = set()
    pending = [role.upper() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", role) else role]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > _MAX_ROLES:
            return Grant("USAGE", "ROLE", current, role)  # a hierarchy too deep to judge
        if current.upper() in ADMIN_ROLES:
            return Grant("USAGE", "ROLE", current, role)
        for grant in _grants(current, show):
            if not judge_grant(grant):
                return grant
            if grant.kind.upper() == "ROLE":
                pending.append(grant.name.strip('"'))
    return None


def _grants(role: str, show: Callable[[str], list[dict[str, Any]]]) -> list[Grant]:
    found: list[Grant] = []
    for future, sql in ((False, "show grants to role"), (True, "show future grants to role")):
        for row in show(f"{sql} {quote(role)}"):
            low = {str(k).lower(): v for k, v in row.items()}
            kind = str(low.get("granted_on") or low.get("grant_on") or "")
            found.append(Grant(str(low.get("privilege") or ""), kind,
                               str(low.get("name") or ""), role, future))  # fmt: skip
    return found


def check_sf_role(warehouse: Any, role: str) -> str:
    """CannotVerifySafely when `role` (connected as it through `warehouse`, a
    `patchit.sandbox.snowflake.SfWarehouse`) may write the user's data; else the isolation
    line's words on its grants."""

    def show(sql: str) -> list[dict[str, Any]]:
        columns, rows = warehouse.query_with_columns(sql)
        return [dict(zip(columns, row, strict=False)) for row in rows]

    try:
        found = unsafe_grant(role, show)
    except HarnessError as exc:
        if _emulator(warehouse, str(exc)):
            return EMULATOR_NOTE
        raise CannotVerifySafely(f"{CANNOT_SF}: the grants of [sandbox] sf_role {role} "
                                 f"cannot be read ({exc})") from exc  # fmt: skip
    if found is not None:
        raise CannotVerifySafely(
            f"{CANNOT_SF}: [sandbox] sf_role {role} may write your data: {found.describe()}; "
            f"revoke it, or name a role with only the grants of `patchit doctor`'s fix"
        )
    return "its grants read: it may write only the schemas it makes"


def may_create_database(warehouse: Any, role: str) -> bool | None:
    """Whether `role` (or a role it inherits) holds CREATE DATABASE on the account, which a
    database of patchit's own needs (`patchit.sandbox.sf_database`); None when its grants
    cannot be read (the emulator's)."""

    def show(sql: str) -> list[dict[str, Any]]:
        columns, rows = warehouse.query_with_columns(sql)
        return [dict(zip(columns, row, strict=False)) for row in rows]

    seen: set[str] = set()
    pending = [role.upper() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", role) else role]
    try:
        while pending and len(seen) <= _MAX_ROLES:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            for grant in _grants(current, show):
                kind = grant.kind.upper()
                if kind == "ACCOUNT" and grant.privilege.upper() == "CREATE DATABASE":
                    return True
                if kind == "ROLE" and not grant.future:
                    pending.append(grant.name.strip('"'))
    except HarnessError:
        return None
    return False


def _emulator(warehouse: Any, error: str) -> bool:
    """fakesnow: `show grants` does not parse (DuckDB's parser) and the role is DuckDB's."""
    if "Parser Error" not in error:
        return False
    try:
        rows: Sequence[tuple[Any, ...]] = warehouse.query("select current_role()")
    except HarnessError:
        return False
    return bool(rows) and rows[0][0] == "duckdb"

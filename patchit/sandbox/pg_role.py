"""The role candidate code runs as on a shared Postgres database: one that cannot write the
user's schemas.

Where an incident gets no copy of the database (`patchit.sandbox.pg_clone`), its candidates
are built in sandbox schemas of the user's database. dbt then does not connect as the
profile's user: a `post_hook` is any SQL, and with the user's role `drop table
analytics.precious` drops it. In a copy, the user's role still reaches the user's database
through what is the server's, not the database's (`alter database <the user's> set ...`, or
`rename`, by its owner; `COPY ... TO PROGRAM` as a member of `pg_execute_server_program`; a
superuser role it may `set role` to), so the same role is used there too, and without one a
copy is not verified either.

`SET ROLE` (dbt-postgres's `role:` field, or `options=-c role=...`) is no boundary: any
statement may `set role none` and is the session user again. So dbt logs in as another role,
whose session cannot become the user's:

- `[sandbox] pg_role`, a LOGIN role the operator's DBA made (its password, if the server asks
  for one, in `PATCHIT_PG_ROLE_PASSWORD`): USAGE and SELECT on what the project reads, a member
  of no other role, granted to the profile's user (`grant_statements` prints the SQL);
- else, when the profile's user may create roles (CREATEROLE or superuser), one patchit makes
  for the heal, `patchit_r_<12 hex>`: LOGIN with a random password sent as a SCRAM verifier
  (never in clear, valid one day), no other right, granted to the profile's user, USAGE and
  SELECT on the schemas the selection reads, and dropped with the sandbox (`drop owned by`,
  then `drop role`; a dead run's is swept like its schemas);
- else nothing runs: the incident is escalated, "cannot verify safely on a shared database"
  (or "... even in a copy of the database"), with the statements that would make the role.

Either way patchit's own connection creates each sandbox schema and grants the role USAGE and
CREATE on it and on nothing else, and then proves the role can write nothing outside them (no
table privilege besides SELECT, no CREATE on a schema, no membership it could `set role` to):
rights a DBA gave PUBLIC count, and any found stops the heal the same way. The profile's
user is a member of the role so that patchit can read what the role built (the data check)
and drop it.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from dataclasses import dataclass
from typing import Any

from patchit.errors import HarnessError
from patchit.sandbox.postgres import (
    SANDBOX_NAME,
    SANDBOX_PREFIX,
    PgWarehouse,
    dbname_of,
    owner_comment,
    quote_ident,
)
from patchit.state.liveness import placed_owner

ROLE_PREFIX = "patchit_r_"
ROLE_NAME = re.compile(r"^patchit_r_[0-9a-f]{12}$")
ROLE_PASSWORD_ENV = "PATCHIT_PG_ROLE_PASSWORD"  # the operator's pg_role's password, if any
SUGGESTED_ROLE = "patchit_sandbox"
CANNOT = "cannot verify safely on a shared database"
CANNOT_IN_COPY = "cannot verify safely even in a copy of the database"
_SYSTEM = ("pg_catalog", "information_schema", "pg_toast")

# What the role can write outside patchit's sandbox schemas: a relation it may change (its
# own, or a right granted to it or PUBLIC), a schema it may create in, a role it may become
_WRITABLE = """
select 'table ' || n.nspname || '.' || c.relname from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p', 'v', 'm', 'f') and n.nspname <> all(%(system)s)
  and n.nspname not like %(sandbox)s and n.nspname not like 'pg\\_temp\\_%%'
  and has_table_privilege(%(role)s, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER')
union all
select 'schema ' || n.nspname from pg_namespace n
where n.nspname <> all(%(system)s) and n.nspname not like %(sandbox)s
  and n.nspname not like 'pg\\_%%' and has_schema_privilege(%(role)s, n.oid, 'CREATE')
union all
select 'role ' || r.rolname || ' (set role)' from pg_auth_members m
  join pg_roles r on r.oid = m.roleid where m.member = (select oid from pg_roles
  where rolname = %(role)s)
order by 1
"""
_ABOUT = """
select r.rolsuper, r.rolcreaterole, r.rolcanlogin, pg_has_role(current_user, r.oid, 'USAGE')
from pg_roles r where r.rolname = %s
"""


class CannotVerifySafely(HarnessError):
    """No role that cannot write the user's schemas is at hand: nothing may run (the incident
    is escalated, with what to grant)."""


@dataclass(frozen=True)
class Restricted:
    """The role a candidate's dbt logs in as: its name, its password (None: the server asks
    for none, or the profile's way of authenticating serves), whether patchit made it (and
    drops it)."""

    role: str
    password: str | None
    made: bool


def role_output(output: dict[str, Any], restricted: Restricted) -> dict[str, Any]:
    """`output` logging in as the restricted role (dbt-postgres's `role:` dropped: the role
    may not become the user's; no password: "", the server asks for none)."""
    moved = {k: v for k, v in output.items() if k not in ("user", "role", "password", "pass")}
    moved["user"] = restricted.role
    moved["password"] = restricted.password or ""  # dbt-postgres requires the key
    return moved


def grant_statements(output: dict[str, Any], schemas: list[str], role: str = "") -> str:
    """The SQL a DBA runs to make `[sandbox] pg_role` for `output`'s database (reading
    `schemas`), and the setting that names it."""
    role = role or SUGGESTED_ROLE
    user, db = str(output.get("user") or "<profile user>"), dbname_of(output) or "<database>"
    r = quote_ident(role)
    reads = "".join(
        f" grant usage on schema {quote_ident(s)} to {r};"
        f" grant select on all tables in schema {quote_ident(s)} to {r};"
        for s in schemas
    )
    return (
        f"create role {r} login password '...'; grant connect, temporary on database "
        f"{quote_ident(db)} to {r};{reads} grant {r} to {quote_ident(user)}; then set "
        f'[sandbox] pg_role = "{role}" in $PATCHIT_HOME/patchit.toml and its password in '
        f"{ROLE_PASSWORD_ENV} (or grant the profile's user CREATEROLE: patchit then makes one "
        "per heal)"
    )


def may_create_roles(warehouse: PgWarehouse) -> bool:
    [(may,)] = warehouse.query(
        "select rolsuper or rolcreaterole from pg_roles where rolname = current_user"
    )
    return bool(may)


def make_role(warehouse: PgWarehouse) -> Restricted:
    """A fresh `patchit_r_<12 hex>` LOGIN role with no right but CONNECT and TEMPORARY on the
    database, a member of nothing, granted to this connection's user, labelled with its
    owner (`patchit.sandbox.pg_orphans` judges the label)."""
    import psycopg2.extensions

    role, password = f"{ROLE_PREFIX}{secrets.token_hex(6)}", secrets.token_hex(24)
    conn = warehouse._connection()
    # the server gets a SCRAM verifier, never the password itself (its log may show DDL)
    verifier = psycopg2.extensions.encrypt_password(password, role, conn, "scram-sha-256")
    r = quote_ident(role)
    with warehouse._cursor(read_only=False) as cur:
        cur.execute("select extract(epoch from now())::float8, "
                    "(now() + interval '1 day')::text")  # fmt: skip
        now, until = cur.fetchone()
        cur.execute(
            f"create role {r} login nosuperuser nocreatedb nocreaterole noinherit "
            "noreplication nobypassrls password %s valid until %s",
            (verifier, until),
        )
        cur.execute(f"comment on role {r} is %s", (owner_comment(placed_owner(), float(now)),))
        cur.execute(f"grant {r} to current_user")
    grant_database(warehouse, role)
    return Restricted(role, password, made=True)


def grant_database(warehouse: PgWarehouse, role: str) -> None:
    """CONNECT and TEMPORARY on the connection's database for `role`: PUBLIC has both unless
    a DBA revoked them (patchit's copy revokes them); a user that does not own the database may
    not grant them, and the login probe then says what is missing."""
    db = quote_ident(dbname_of(warehouse.output))
    with contextlib.suppress(HarnessError), warehouse._cursor(read_only=False) as cur:
        cur.execute(f"grant connect, temporary on database {db} to {quote_ident(role)}")


def grant_reads(warehouse: PgWarehouse, role: str, schemas: list[str]) -> list[str]:
    """USAGE on each of `schemas` and SELECT on its tables and views, for a role patchit
    made; a line per grant the profile's user could not give (the run may then fail to read
    it: it cannot write it either)."""
    _check_made(role)
    missed: list[str] = []
    for schema in schemas:
        s, r = quote_ident(schema), quote_ident(role)
        try:
            with warehouse._cursor(read_only=False) as cur:
                cur.execute("select 1 from pg_namespace where nspname = %s", (schema,))
                if cur.fetchone() is None:
                    continue
                cur.execute(f"grant usage on schema {s} to {r}")
                cur.execute(f"grant select on all tables in schema {s} to {r}")
        except HarnessError as exc:
            missed.append(f"schema {schema}: {exc}")
    return missed


def admit(warehouse: PgWarehouse, role: str, schemas: list[str]) -> None:
    """USAGE and CREATE on sandbox schemas `schemas` (made when missing: dbt's
    `<sandbox>_<custom>` ones, which the role may not create itself) for `role`."""
    r = quote_ident(role)
    with warehouse._cursor(read_only=False) as cur:
        for schema in schemas:
            base = schema.split("_", 2)
            if not SANDBOX_NAME.match("_".join(base[:2])):  # never a schema patchit did not make
                raise HarnessError(f"refusing to open schema {schema!r} to {role}: not a sandbox")
            s = quote_ident(schema)
            cur.execute(f"create schema if not exists {s}")
            cur.execute(f"grant usage, create on schema {s} to {r}")


def check_role(warehouse: PgWarehouse, role: str, made: bool) -> None:
    """CannotVerifySafely when `role` is missing, may log in as nobody, may become a
    superuser or another role, is not granted to this connection's user, or can write
    anything outside patchit's sandbox schemas."""
    rows = warehouse.query(_ABOUT, (role,))
    whose = "patchit's role" if made else "[sandbox] pg_role"
    if not rows:
        raise CannotVerifySafely(f"{CANNOT}: {whose} {role} does not exist")
    superuser, createrole, login, granted = rows[0]
    if superuser or createrole:
        raise CannotVerifySafely(f"{CANNOT}: {whose} {role} is a superuser or may create roles "
                                 "(it could make itself any role)")  # fmt: skip
    if not login:
        raise CannotVerifySafely(
            f"{CANNOT}: {whose} {role} cannot log in (NOLOGIN); SET ROLE is no boundary, a "
            "hook's `set role none` undoes it: alter role " + quote_ident(role) + " login"
        )
    user = str(warehouse.output.get("user") or "the profile's user")
    if not granted:
        raise CannotVerifySafely(
            f"{CANNOT}: {whose} {role} is not granted to {user} (patchit reads and drops what "
            f"it builds): grant {quote_ident(role)} to {quote_ident(user)}"
        )
    sandboxes = SANDBOX_PREFIX.replace("_", "\\_") + "%"
    params = {"system": list(_SYSTEM), "sandbox": sandboxes, "role": role}
    writes = [str(r[0]) for r in warehouse.query(_WRITABLE, params)]
    if writes:
        more = f" and {len(writes) - 5} more" if len(writes) > 5 else ""
        raise CannotVerifySafely(
            f"{CANNOT}: {whose} {role} can write {', '.join(writes[:5])}{more} (granted to it "
            "or to PUBLIC); revoke that, or verify by hand"
        )


def probe_login(output: dict[str, Any], restricted: Restricted) -> None:
    """CannotVerifySafely when dbt could not log in as the role (pg_hba.conf, a pooler)."""
    probe = PgWarehouse(role_output(output, restricted), purpose="the restricted role")
    try:
        probe.query("select 1")
    except HarnessError as exc:
        raise CannotVerifySafely(
            f"{CANNOT}: cannot log in as {restricted.role} ({exc}); let it log in "
            "(pg_hba.conf), or verify by hand"
        ) from exc
    finally:
        probe.close()


def drop_role(warehouse: PgWarehouse, role: str, if_comment: str | None = None) -> bool:
    """Drop patchit's role `role` with what it owns and was granted in this database; with
    `if_comment`, only while its comment is still that. Whether it was dropped."""
    _check_made(role)
    r = quote_ident(role)
    with warehouse._cursor(read_only=False) as cur:
        cur.execute("select shobj_description(oid, 'pg_authid') from pg_roles "
                    "where rolname = %s", (role,))  # fmt: skip
        row = cur.fetchone()
        if row is None or (if_comment is not None and row[0] != if_comment):
            return False
        cur.execute(f"drop owned by {r}")
        cur.execute(f"drop role {r}")
        return True


def roles(warehouse: PgWarehouse) -> list[tuple[str, str | None, float]]:
    """Every `patchit_r_<12 hex>` role this connection's user is a member of: its name,
    comment, and the server's time now."""
    rows = warehouse.query(
        "select rolname, shobj_description(oid, 'pg_authid'), extract(epoch from now())::float8 "
        "from pg_roles where rolname ~ %s and pg_has_role(current_user, oid, 'MEMBER') "
        "order by 1",
        (ROLE_NAME.pattern,),
    )
    return [(str(r[0]), None if r[1] is None else str(r[1]), float(r[2])) for r in rows]


def _check_made(role: str) -> None:
    if not ROLE_NAME.match(role):  # never a role patchit did not make
        raise HarnessError(f"refusing to change role {role!r}: not patchit's")

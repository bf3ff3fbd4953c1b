"""The Snowflake sandbox: one schema per candidate in the user's database, read-only elsewhere.

A candidate's dbt run gets a profile whose `schema:` is `PATCHIT_<incident>_<n>` (named after
the candidate's scratch dir: the incident's folder and the candidate's number, so the same
workspace always gets the same schema and two never share one). dbt builds the selected models
there and resolves every unselected `ref()` to the user's relation through `--defer --state
<the failing run's manifest>`: nothing is copied, the user's relations are read, never written.
Where a selected incremental model or snapshot must build on what it has, its table is cloned
into the sandbox first (`create table ... clone ...`: zero-copy, free until written), as the
Postgres sandbox copies it (`patchit.harnesses.dbt.sf`). The guard of `patchit.harnesses.dbt.pg`
refuses a build that `generate_schema_name` would route out of the sandbox.

The sandbox lives in the user's database, or with `[sandbox] sf_database = "auto"` in a
database of patchit's own, a zero-copy clone of it (`patchit.sandbox.sf_database`).

Each schema is labelled with its owner (`patchit.state.liveness.placed_owner`) and the server's
time, in the comment Postgres's sandbox schemas carry (`patchit.sandbox.postgres.owner_comment`),
judged by the same rules when a later run sweeps a killed run's schemas. Snowflake keeps a
schema's comment; the emulator does not, so the label is also the one row of a table
`PATCHIT_SANDBOX_OWNER` inside the schema, read when the comment is empty.

patchit's own connection (snowflake-connector-python, the profile's credentials) creates and
drops sandbox schemas (names matching `SANDBOX_NAME`, and dbt's `<schema>_<custom>` ones),
clones tables into them, lists the user's relations, and reads both runs' relations for the
data check. The password is never written to disk: the sandbox profile reads it from an
environment variable set only for the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.sandbox.postgres import owner_comment
from patchit.state.liveness import placed_owner

SANDBOX_PREFIX = "PATCHIT_"
SANDBOX_NAME = re.compile(r"^PATCHIT_[A-Z0-9]+_[A-Z0-9]+$")
OWNER_TABLE = "PATCHIT_SANDBOX_OWNER"
PASSWORD_ENV = "PATCHIT_SANDBOX_SF_PASSWORD"
LOGIN_TIMEOUT_S = 10
# What the connector takes from a dbt-snowflake profile output, under the connector's names
_KEYS = ("account", "user", "database", "warehouse", "role", "host", "port", "protocol",
         "authenticator", "private_key_path", "region")  # fmt: skip


def is_snowflake(output: dict[str, Any]) -> bool:
    return str(output.get("type") or "") == "snowflake"


def _token(text: str, width: int) -> str:
    return re.sub(r"[^A-Za-z0-9]", "", text).upper()[:width]


def sandbox_schema(scratch: Path) -> str:
    """The candidate's schema, `PATCHIT_<incident>_<n>`: the scratch dir's parent (the
    incident's folder) and its number (`candidate-3` -> C3, a baseline's `run-1` -> R1); a
    scratch dir of another shape gets 8 hex digits of its path instead of the number."""
    scratch = scratch.resolve()
    incident = _token(scratch.parent.name, 24) or "X"
    found = re.fullmatch(r"([A-Za-z])[A-Za-z]*-(\d+)", scratch.name)
    if found:
        number = found.group(1).upper() + found.group(2)
    else:
        number = "H" + hashlib.sha256(str(scratch).encode()).hexdigest()[:8].upper()
    return f"{SANDBOX_PREFIX}{incident}_{number}"


def password_of(output: dict[str, Any]) -> str | None:
    value = output.get("password")
    return None if value is None else str(value)


def sandbox_output(output: dict[str, Any], schema: str) -> dict[str, Any]:
    """The profile output a candidate's dbt run uses: the user's, with `schema:` the sandbox
    schema and the password read from `PASSWORD_ENV` (never written into the file)."""
    sandboxed = {k: v for k, v in output.items() if k != "password"}
    sandboxed["schema"] = schema
    if password_of(output) is not None:
        sandboxed["password"] = "{{ env_var('" + PASSWORD_ENV + "') }}"
    return sandboxed


def connect_args(output: dict[str, Any]) -> dict[str, Any]:
    """snowflake.connector.connect() keyword arguments for a dbt-snowflake profile output."""
    args: dict[str, Any] = {"login_timeout": LOGIN_TIMEOUT_S, "network_timeout": 60,
                            "application": "patchit"}  # fmt: skip
    for key in _KEYS:
        if output.get(key) not in (None, ""):
            args[key] = output[key]
    if password_of(output):
        args["password"] = password_of(output)
    return args


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def ident(name: str) -> str:
    """An unquoted-style name as Snowflake stores it: upper case (dbt-snowflake quotes
    nothing by default, so `jaffle` in a profile is the schema JAFFLE)."""
    return name.upper() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name) else name


class SfWarehouse:
    """patchit's own connection to the profile's database; close() when done. Every error is
    a HarnessError naming what was being done."""

    def __init__(self, output: dict[str, Any], purpose: str = "the sandbox") -> None:
        self.output = output
        self.purpose = purpose
        self.database = ident(str(output.get("database") or ""))
        if not self.database:
            raise HarnessError("the Snowflake profile names no `database:`; add one")
        self._conn: Any = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """The database, as `patchit sandbox clean` names it."""
        return f"database {self.database}"

    def _connection(self) -> Any:
        if self._conn is None:
            import snowflake.connector

            try:
                self._conn = snowflake.connector.connect(**connect_args(self.output))
            except Exception as exc:  # the connector's errors have no common base we can name
                raise HarnessError(f"{self.purpose}: cannot connect to Snowflake "
                                   f"({first_line(exc)})") from exc  # fmt: skip
        return self._conn

    def query(self, sql: str, params: Iterable[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.query_with_columns(sql, params)[1]

    def query_with_columns(
        self, sql: str, params: Iterable[Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The column names and rows of `sql` (a SHOW command's columns are read by name)."""
        with self._lock:
            try:
                cur = self._connection().cursor()
                try:
                    cur.execute(sql, tuple(params) if params is not None else None)
                    rows = cur.fetchall()
                    columns = [str(d[0]) for d in cur.description or []]
                finally:
                    cur.close()
            except HarnessError:
                raise
            except Exception as exc:
                raise HarnessError(f"{self.purpose}: {first_line(exc)}") from exc
        return columns, [tuple(r) for r in rows]

    def _info(self, view: str) -> str:
        return f"{quote(self.database)}.information_schema.{view}"

    def _schemas_like(self, schema: str) -> list[str]:
        """`schema` and dbt's `<schema>_<custom>` schemas beside it that exist."""
        rows = self.query(f"select schema_name from {self._info('schemata')}")
        return sorted(str(r[0]) for r in rows
                      if str(r[0]) == schema or str(r[0]).startswith(f"{schema}_"))  # fmt: skip

    def reset(self, schema: str, owner: str | None = None) -> None:
        """An empty sandbox schema `schema` (dropped first when an earlier run left it),
        labelled with its owner and the server's time."""
        self._check_name(schema)
        self.drop(schema)
        now = float(self.query("select date_part(epoch_second, current_timestamp())")[0][0])
        comment = owner_comment(owner or placed_owner(), now)
        name = f"{quote(self.database)}.{quote(schema)}"
        self.query(f"create schema {name} comment = {literal(comment)}")
        self.query(f"create table {name}.{OWNER_TABLE} (comment varchar)")
        self.query(f"insert into {name}.{OWNER_TABLE} values ({literal(comment)})")

    def drop(self, schema: str, if_comment: str | None = None) -> bool:
        """Drop sandbox schema `schema` and its `<schema>_<custom>` schemas (only when its
        label still reads `if_comment`, when given); True when it was there to drop."""
        self._check_name(schema)
        found = self._schemas_like(schema)
        if not found:
            return False
        if if_comment is not None and self.label(schema) != if_comment:
            return False  # re-made meanwhile by a live run
        for name in found:
            self.query(f"drop schema if exists {quote(self.database)}.{quote(name)} cascade")
        return schema in found

    def label(self, schema: str) -> str | None:
        """The owner label of sandbox schema `schema`: its comment, else its owner table's."""
        rows = self.query(
            f"select comment from {self._info('schemata')} where schema_name = %s", (schema,)
        )
        if rows and rows[0][0]:
            return str(rows[0][0])
        try:
            found = self.query(
                f"select comment from {quote(self.database)}.{quote(schema)}.{OWNER_TABLE}"
            )
        except HarnessError:
            return None
        return str(found[0][0]) if found and found[0][0] else None

    def sandboxes(self) -> list[tuple[str, str | None, float]]:
        """Every `PATCHIT_<incident>_<n>` schema of the database: its name, label, and the
        server's time now (seconds since the epoch)."""
        now = float(self.query("select date_part(epoch_second, current_timestamp())")[0][0])
        rows = self.query(f"select schema_name from {self._info('schemata')}")
        names = sorted(str(r[0]) for r in rows if SANDBOX_NAME.match(str(r[0])))
        return [(name, self.label(name), now) for name in names]

    def relations(self, schemas: Iterable[str]) -> set[str]:
        """Names of the tables and views in `schemas` (as Snowflake stores the names)."""
        wanted = {ident(s) for s in schemas}
        found: set[str] = set()
        for view in ("tables", "views"):
            rows = self.query(f"select table_schema, table_name from {self._info(view)}")
            found |= {str(r[1]) for r in rows if str(r[0]) in wanted}
        return found

    def exists(self, schema: str, name: str) -> bool:
        rows = self.query(
            f"select count(*) from {self._info('tables')} where table_schema = %s "
            "and table_name = %s",
            (ident(schema), ident(name)),
        )
        return int(rows[0][0]) > 0

    def clone_table(
        self,
        schema: str,
        source: tuple[str, str],
        dest: tuple[str, str],
        at_utc: datetime | None = None,
    ) -> tuple[int, str]:
        """`create table <dest> clone <source>` in the database (zero-copy), as of `at_utc`
        where Snowflake's time travel still has it; its row count, and a note saying which
        moment was cloned ("" when no moment was asked)."""
        self._check_name(schema)
        if not (dest[0] == schema or dest[0].startswith(f"{schema}_")):
            raise HarnessError(f"refusing to clone into {dest[0]}: not sandbox schema {schema}")
        db = quote(self.database)
        src = f"{db}.{quote(ident(source[0]))}.{quote(ident(source[1]))}"
        dst_schema = f"{db}.{quote(ident(dest[0]))}"
        dst = f"{dst_schema}.{quote(ident(dest[1]))}"
        self.query(f"create schema if not exists {dst_schema}")
        note = ""
        if at_utc is not None:
            try:
                self.query(clone_sql(dst, src, at_utc))
                note = f"as of the failing run's start, {at_utc:%Y-%m-%d %H:%M:%S} UTC"
            except HarnessError as exc:
                # no time travel there (a transient table with 0 days' retention, data older
                # than the retention, the emulator): the table as it is now
                note = f"as it is now, not as of the failing run's start ({exc})"
        if not note or note.startswith("as it is now"):
            self.query(clone_sql(dst, src, None))
        rows = self.query(f"select count(*) from {dst}")
        return int(rows[0][0]), note

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):  # closed or broken: nothing left to close
                    self._conn.close()
            self._conn = None

    @staticmethod
    def _check_name(schema: str) -> None:
        if not SANDBOX_NAME.match(schema):  # never a name patchit did not make
            raise HarnessError(f"refusing to touch schema {schema!r}: not a patchit sandbox")


def clone_sql(dest: str, source: str, at_utc: datetime | None) -> str:
    """`create table <dest> clone <source>`, with Snowflake's time travel clause
    `at(timestamp => ...)` as of `at_utc` (an aware time, or naive UTC) when given: the table
    as the failing run read it, whatever was written to it since."""
    sql = f"create table {dest} clone {source}"
    if at_utc is None:
        return sql
    moment = (at_utc if at_utc.tzinfo else at_utc.replace(tzinfo=UTC)).astimezone(UTC)
    stamp = moment.strftime("%Y-%m-%d %H:%M:%S.%f +00:00")
    return (f"{sql} at(timestamp => to_timestamp_tz({literal(stamp)}, "
            "'YYYY-MM-DD HH24:MI:SS.FF6 TZH:TZM'))")  # fmt: skip


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

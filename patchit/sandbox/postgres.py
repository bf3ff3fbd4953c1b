"""The Postgres sandbox: one schema per candidate in the user's database, read-only elsewhere.

A candidate's dbt run gets a profile whose `schema:` is `patchit_<12 hex>` (named after the
candidate's scratch dir, so the same workspace always gets the same schema, and two never
share one). dbt builds the selected models there and resolves every unselected `ref()` to the
user's relation through `--defer --state <the failing run's manifest>`: the user's relations are
read, never written. A model whose custom `generate_schema_name` would route it out of the
sandbox is refused before anything is built (`patchit.harnesses.dbt.pg`).

patchit's own connection does three things only: create and drop sandbox schemas (names that
match `SANDBOX_NAME`, and dbt's `<schema>_<custom>` schemas derived from them), list the
relations of the user's database, and compare relations for the data check. The last two run
in read-only transactions, as do the evidence's reads (`patchit.evidence.pg_columns`, a failing
test's rows in `patchit.evidence.failing_rows`). The password is never written to disk: the
sandbox profile reads it from an environment variable set only for the run.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.state.liveness import placed_owner

SANDBOX_PREFIX = "patchit_"
SANDBOX_NAME = re.compile(r"^patchit_[0-9a-f]{12}$")
PASSWORD_ENV = "PATCHIT_SANDBOX_PG_PASSWORD"
CONNECT_TIMEOUT_S = 10
LOCK_CLASS = 0x7061  # "pa": the advisory lock class of sandbox schemas (and a name's hash)
# Schemas patchit never lists as the user's relations
_SYSTEM = ("pg_catalog", "information_schema", "pg_toast")

_KEYS = {"host": "host", "port": "port", "user": "user", "dbname": "dbname",
         "database": "dbname", "sslmode": "sslmode", "sslcert": "sslcert", "sslkey": "sslkey",
         "sslrootcert": "sslrootcert", "connect_timeout": "connect_timeout"}  # fmt: skip


COMMENT_HEAD = "patchit sandbox:"


def owner_comment(owner: str, created_epoch: float) -> str:
    """The comment of a sandbox schema made by `owner` at `created_epoch` (server time), read
    back by `patchit.sandbox.pg_orphans` to judge whether its run is dead."""
    created = datetime.fromtimestamp(created_epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    head = f"{COMMENT_HEAD} dropped when the heal ends; safe to drop"
    return f"{head}; owner={owner}; created={created}"


def is_postgres(output: dict[str, Any]) -> bool:
    return str(output.get("type") or "") == "postgres"


def sandbox_schema(scratch: Path) -> str:
    """The candidate's schema: `patchit_` and 12 hex digits of its scratch dir's path."""
    digest = hashlib.sha256(str(scratch.resolve()).encode()).hexdigest()
    return f"{SANDBOX_PREFIX}{digest[:12]}"


def password_of(output: dict[str, Any]) -> str | None:
    value = output.get("password", output.get("pass"))
    return None if value is None else str(value)


def sandbox_output(output: dict[str, Any], schema: str) -> dict[str, Any]:
    """The profile output a candidate's dbt run uses: the user's, with `schema:` the sandbox
    schema and the password read from `PASSWORD_ENV` (never written into the file)."""
    sandboxed = {k: v for k, v in output.items() if k not in ("password", "pass")}
    sandboxed["schema"] = schema
    if password_of(output) is not None:
        sandboxed["password"] = "{{ env_var('" + PASSWORD_ENV + "') }}"
    return sandboxed


def connect_args(output: dict[str, Any]) -> dict[str, Any]:
    """psycopg2.connect() keyword arguments for a dbt-postgres profile output."""
    args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "patchit"}
    for key, name in _KEYS.items():
        if output.get(key) not in (None, ""):
            args[name] = output[key]
    password = password_of(output)
    if password:
        args["password"] = password
    return args


def _lock_schema(cur: Any, schema: str) -> None:
    """The transaction's lock on sandbox schema `schema`: making it and sweeping it as an
    orphan never interleave."""
    cur.execute("select pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, schema))


# Objects outside a sandbox's schemas that depend on something inside them, which `drop schema
# ... cascade` would remove with it: a user's view selecting from a sandbox table (its rule), a
# foreign key of a user's table, a user's column of a sandbox type or default on its sequence.
# An object's place is its schema, or its relation's; internal dependencies (a TOAST table, a
# row type) are the object's own.
_DEPENDENTS = """
with s as (select oid from pg_namespace where nspname = any(%s)),
inside(classid, objid) as (
  select 'pg_namespace'::regclass, oid from s
  union all select 'pg_class'::regclass, oid from pg_class where relnamespace in (table s)
  union all select 'pg_type'::regclass, oid from pg_type where typnamespace in (table s)
  union all select 'pg_proc'::regclass, oid from pg_proc where pronamespace in (table s)
  union all select 'pg_constraint'::regclass, oid from pg_constraint
    where connamespace in (table s)
  union all select 'pg_rewrite'::regclass, r.oid from pg_rewrite r
    join pg_class c on c.oid = r.ev_class where c.relnamespace in (table s)
  union all select 'pg_attrdef'::regclass, a.oid from pg_attrdef a
    join pg_class c on c.oid = a.adrelid where c.relnamespace in (table s)
  union all select 'pg_trigger'::regclass, t.oid from pg_trigger t
    join pg_class c on c.oid = t.tgrelid where c.relnamespace in (table s)
)
select distinct pg_describe_object(d.classid, d.objid, d.objsubid)
from pg_depend d join inside i on d.refclassid = i.classid and d.refobjid = i.objid
where d.deptype <> 'i'
  and not exists (select 1 from inside o where o.classid = d.classid and o.objid = d.objid)
order by 1
"""


class SchemaInUse(HarnessError):
    """A sandbox schema was kept: objects outside it depend on it (`why` says which)."""

    def __init__(self, where: str, schema: str, why: str) -> None:
        super().__init__(f"{where}: schema {schema}: {why}")
        self.why = why


def _in_use(cur: Any, names: list[str]) -> str | None:
    """Why the sandbox schemas `names` may not be dropped (what outside depends on them), or
    None."""
    if not names:
        return None
    cur.execute(_DEPENDENTS, (names,))
    found = [str(r[0]) for r in cur.fetchall()]
    if not found:
        return None
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return (
        f"objects outside it depend on it ({', '.join(found[:3])}{more}); drop or repoint "
        "them, then run `patchit sandbox clean`"
    )


@dataclass(frozen=True)
class Copied:
    """What `PgWarehouse.copy_table` did: the rows copied, or None and why not; the source's
    size in bytes; whether only its rows were copied (no constraints, no indexes)."""

    rows: int | None
    why: str
    size: int
    rows_only: bool = False


COPY_LOCK_TIMEOUT_S = 10  # waiting for a lock on the user's table: another run's DDL
COPY_TIMEOUT_S = 300  # one statement of a copy
# A relation's kind and size in bytes, with its partitions and inheritance children (whose
# rows `select *` reads too); no row when it does not exist
_SIZE = """
with recursive rel as (
  select c.oid, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = %s and c.relname = %s
), tree(oid) as (
  select oid from rel union select i.inhrelid from pg_inherits i join tree t on i.inhparent = t.oid
)
select (select relkind from rel), (select sum(pg_total_relation_size(oid)) from tree),
  exists (select 1 from tree t join pg_class c on c.oid = t.oid where c.relkind = 'f')
from rel
"""
GENERATED_ALWAYS = "428C9"  # Postgres's error for a value written to a generated column


def _megabytes(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def quote_ident(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def first_line(exc: BaseException) -> str:
    """An error's first line (its type's name when it says nothing)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def dbname_of(output: dict[str, Any]) -> str:
    """The database a dbt-postgres profile output names ("" for none)."""
    return str(output.get("dbname") or output.get("database") or "")


def _where(output: dict[str, Any]) -> str:
    host = output.get("host") or "localhost"
    port = output.get("port") or 5432
    db = dbname_of(output) or "?"
    return f"postgres {host}:{port}/{db}"


class PgWarehouse:
    """patchit's own connection to the user's Postgres database (one per harness)."""

    def __init__(self, output: dict[str, Any], purpose: str = "the sandbox") -> None:
        self.output = output
        self.where = _where(output)
        self.purpose = purpose  # what the connection is for, in its errors
        self._conn: Any = None
        # one transaction at a time on the one connection (a baseline may be built beside a
        # candidate, from another thread)
        self._lock = threading.RLock()

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            try:
                import psycopg2
            except ImportError as exc:  # dbt-postgres brings psycopg2
                raise HarnessError(
                    "a Postgres sandbox needs psycopg2: pip install 'patchit[dbt]'"
                ) from exc
            try:
                self._conn = psycopg2.connect(**connect_args(self.output))
            except psycopg2.Error as exc:
                first = first_line(exc)
                raise HarnessError(
                    f"{self.where}: cannot connect for {self.purpose} ({first}); check the profile"
                ) from exc
            self._conn.autocommit = True
        return self._conn

    @contextmanager
    def _cursor(self, read_only: bool) -> Iterator[Any]:
        import psycopg2

        with self._lock:
            yield from self._transaction(psycopg2, read_only)

    def _transaction(self, psycopg2: Any, read_only: bool) -> Iterator[Any]:
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.execute("begin read only" if read_only else "begin")
                try:
                    yield cur
                except BaseException:
                    cur.execute("rollback")
                    raise
                cur.execute("commit")
        except psycopg2.Error as exc:
            first = first_line(exc)
            raise HarnessError(f"{self.where}: {first}") from exc

    def query(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """One read-only statement; its rows."""
        with self._cursor(read_only=True) as cur:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    def sample(
        self, sql: str, limit: int, timeout_s: float
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """At most `limit` rows of `sql` (its column names, its rows) in a read-only
        transaction whose statements stop after `timeout_s` (`statement_timeout`): a query
        over a big table must not stall the heal, and cannot write."""
        with self._cursor(read_only=True) as cur:
            cur.execute("set transaction read only")
            cur.execute("select set_config('statement_timeout', %s, true)",
                        (f"{max(1, int(timeout_s * 1000))}ms",))  # fmt: skip
            cur.execute(f"select * from ({sql}) as failing limit {int(limit)}")
            names = [str(d[0]) for d in cur.description or []]
            return names, list(cur.fetchall())

    def _sandbox_schemas(self, cur: Any, schema: str) -> list[str]:
        """`schema` and dbt's `<schema>_<custom>` schemas, as they exist now: those of the same
        owner as `schema` (of this connection's role while there is no `schema`); another
        role's `<schema>_...` is not this sandbox's."""
        cur.execute(
            "select nspname from pg_namespace where nspname = %s or (nspname like %s and "
            "nspowner = coalesce((select nspowner from pg_namespace where nspname = %s), "
            "(select oid from pg_roles where rolname = current_user)))",
            (schema, schema.replace("_", r"\_") + r"\_%", schema),
        )
        return [str(r[0]) for r in cur.fetchall()]

    def reset(self, schema: str) -> None:
        """An empty sandbox schema `schema` (what an earlier run of it left is dropped), its
        comment naming this process as its owner (`patchit.sandbox.pg_orphans`)."""
        self._check_name(schema)
        with self._cursor(read_only=False) as cur:
            _lock_schema(cur, schema)
            names = self._sandbox_schemas(cur, schema)
            if why := _in_use(cur, names):
                raise SchemaInUse(self.where, schema, why)
            for name in names:
                cur.execute(f"drop schema {quote_ident(name)} cascade")
            cur.execute(f"create schema {quote_ident(schema)}")
            # the server's clock: hosts' clocks may disagree, and the age is judged by it too
            cur.execute("select extract(epoch from now())::float8")
            comment = owner_comment(placed_owner(), float(cur.fetchone()[0]))
            cur.execute(f"comment on schema {quote_ident(schema)} is %s", (comment,))

    def drop(self, schema: str, if_comment: str | None = None) -> bool:
        """Drop `schema` and dbt's `<schema>_<custom>` schemas; with `if_comment`, only while
        the schema's comment is still exactly that (the check and the drop under one lock, so
        a run that has just re-made the schema keeps it). Whether anything was dropped.
        SchemaInUse (nothing dropped) when objects outside them depend on them: a cascade
        would drop the user's views and foreign keys too."""
        self._check_name(schema)
        with self._cursor(read_only=False) as cur:
            _lock_schema(cur, schema)
            if if_comment is not None:
                cur.execute(
                    "select obj_description(oid, 'pg_namespace') from pg_namespace "
                    "where nspname = %s",
                    (schema,),
                )
                row = cur.fetchone()
                if row is None or row[0] != if_comment:
                    return False
            names = self._sandbox_schemas(cur, schema)
            if why := _in_use(cur, names):
                raise SchemaInUse(self.where, schema, why)
            for name in names:
                cur.execute(f"drop schema {quote_ident(name)} cascade")
            return bool(names)

    def copy_table(
        self,
        sandbox: str,
        source: tuple[str, str],
        dest: tuple[str, str],
        limit_bytes: int,
        owner: str | None = None,
    ) -> Copied:
        """Copy the user's table `source` (schema, name) to `dest`: in sandbox schema `sandbox`
        or one of its `<sandbox>_<custom>` schemas (made if missing), unlogged, with its
        columns' constraints and indexes (`like ... including all`, without defaults or
        identities: a `nextval` would advance the user's sequence, a new identity would
        restart at 1), else its rows alone (a generated column refuses them). The source is
        read, never written, under a `lock_timeout` and a `statement_timeout` (HarnessError
        when one fires). Copied.rows is None, and `why` says so, when `source` is not a
        table, has a foreign partition, or is larger (with its partitions) than
        `limit_bytes`. `owner`: the restricted role the build runs as, made the copy's owner
        (dbt merges into it, and may alter it)."""
        import psycopg2

        self._check_name(sandbox)
        schema, name = dest
        if schema != sandbox and not schema.startswith(f"{sandbox}_"):
            raise HarnessError(f"refusing to copy into schema {schema!r}: not sandbox {sandbox}")
        src = f"{quote_ident(source[0])}.{quote_ident(source[1])}"
        with self._cursor(read_only=False) as cur:
            _lock_schema(cur, sandbox)  # not swept as an orphan meanwhile
            cur.execute("select set_config('lock_timeout', %s, true), "
                        "set_config('statement_timeout', %s, true)",
                        (f"{COPY_LOCK_TIMEOUT_S}s", f"{COPY_TIMEOUT_S}s"))  # fmt: skip
            cur.execute(_SIZE, source)
            row = cur.fetchone()
            if row is None:
                return Copied(None, f"{src} does not exist", 0)
            kind, size = str(row[0]), int(row[1] or 0)
            if kind not in ("r", "p"):
                return Copied(None, f"{src} is not a table", size)
            if row[2]:  # its size says nothing of the rows a foreign partition reads
                return Copied(None, f"{src} has a foreign table among its partitions", size)
            if size > limit_bytes:
                limit = f"{_megabytes(limit_bytes)}, [sandbox] pg_copy_limit_mb"
                return Copied(None, f"{src} is {_megabytes(size)}, above the copy limit ({limit})",
                              size)  # fmt: skip
            cur.execute(f"create schema if not exists {quote_ident(schema)}")
            dst = f"{quote_ident(schema)}.{quote_ident(name)}"
            cur.execute("savepoint patchit_copy")
            rows_only = False
            like = "including all excluding defaults excluding identity"
            try:
                cur.execute(f"create unlogged table {dst} (like {src} {like})")
                cur.execute(f"insert into {dst} select * from {src}")
            except psycopg2.Error as exc:
                if exc.pgcode != GENERATED_ALWAYS:  # a timeout, a lock: said by the caller
                    raise
                cur.execute("rollback to savepoint patchit_copy")
                cur.execute(f"create unlogged table {dst} as table {src}")
                rows_only = True
            if owner is not None:
                cur.execute(f"alter table {dst} owner to {quote_ident(owner)}")
            cur.execute(f"select count(*) from {dst}")
            return Copied(int(cur.fetchone()[0]), "", size, rows_only)

    def in_use(self, schema: str) -> str | None:
        """Why `schema` (with its `<schema>_<custom>` schemas) would be kept by `drop`, or
        None (read-only: `patchit sandbox clean --dry-run`)."""
        self._check_name(schema)
        with self._cursor(read_only=True) as cur:
            return _in_use(cur, self._sandbox_schemas(cur, schema))

    def sandboxes(self) -> list[tuple[str, str | None, float]]:
        """Every `patchit_<12 hex>` schema of the database that this connection's role owns
        (or is a member of its owner): its name, comment, and the server's time now (seconds
        since the epoch). Another role's are not this run's to judge."""
        rows = self.query(
            "select nspname, obj_description(oid, 'pg_namespace'), "
            "extract(epoch from now())::float8 from pg_namespace where nspname ~ %s "
            "and pg_has_role(nspowner, 'MEMBER') order by nspname",
            (SANDBOX_NAME.pattern,),
        )
        return [(str(r[0]), None if r[1] is None else str(r[1]), float(r[2])) for r in rows]

    def relations(self, schemas: Iterable[str] | None = None) -> set[str]:
        """Names of the user's tables and views in `schemas` (every schema: None), never in
        patchit's sandbox schemas or the system's."""
        where = "" if schemas is None else " and table_schema = any(%s)"
        params: tuple[Any, ...] = (list(_SYSTEM), SANDBOX_PREFIX.replace("_", r"\_") + "%")
        rows = self.query(
            "select table_name from information_schema.tables "
            "where table_schema <> all(%s) and table_schema not like %s" + where,
            params if schemas is None else (*params, sorted(set(schemas))),
        )
        return {str(r[0]) for r in rows}

    def schemas_exist(self, schemas: list[str]) -> bool:
        rows = self.query("select count(*) from pg_namespace where nspname = any(%s)", (schemas,))
        return int(rows[0][0]) == len(set(schemas))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and not self._conn.closed:
                self._conn.close()
            self._conn = None

    @staticmethod
    def _check_name(schema: str) -> None:
        if not SANDBOX_NAME.match(schema):  # never a name patchit did not make
            raise HarnessError(f"refusing to touch schema {schema!r}: not a patchit sandbox")

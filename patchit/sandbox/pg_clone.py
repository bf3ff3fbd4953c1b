"""A database of patchit's own on Postgres: a point-in-time copy of the user's database, made
with `create database ... template <the user's>` where the role may.

With a clone, an incident's sandbox schemas live in `patchit_db_<12 hex>`, not in the user's
database: the upstream the candidates read through `--defer` is the copy (the failing run's
manifest is rewritten to name it), so nothing a candidate runs can write a relation of the
user's, even SQL that names the user's schema directly, and data that changes while a
candidate is verified does not change what it reads. The data check still compares two
schemas of one database.

Postgres copies a database only while no other session is connected to it, and only for a
role that may create databases (`rolcreatedb`) and owns the source (or is a superuser, or the
source is marked a template). New connections to the user's database wait while the copy is
made: a database larger than `[sandbox] pg_copy_limit_mb`, or one with other sessions, is not
copied, and the incident is verified in sandbox schemas of the user's database (the report
says why). The clone's comment names its owner, as a sandbox schema's does, and a clone of a
dead run is swept (`patchit.sandbox.pg_orphans`).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.sandbox.postgres import (
    connect_args,
    dbname_of,
    first_line,
    owner_comment,
    quote_ident,
)
from patchit.state.liveness import placed_owner

CLONE_PREFIX = "patchit_db_"
CLONE_NAME = re.compile(r"^patchit_db_[0-9a-f]{12}$")
ONLY_UNUSED = "Postgres copies a database only when nothing else is on it"
OBJECT_IN_USE = "55006"  # Postgres's error for a template database with other sessions
# What a clone needs, read from the server: may this role create databases and copy this
# one, its size, the other processes on it
_CAN_CLONE = """
select r.rolsuper or r.rolcreatedb,
  r.rolsuper or d.datistemplate or pg_has_role(d.datdba, 'USAGE'),
  pg_database_size(d.oid),
  (select count(*) from pg_stat_activity a where a.datid = d.oid and a.pid <> pg_backend_pid()
     and coalesce(a.backend_type, '') <> 'autovacuum worker')
    + (select count(*) from pg_prepared_xacts x where x.database = d.datname),
  exists (select 1 from pg_stat_progress_vacuum v where v.datid = d.oid),
  exists (select 1 from pg_db_role_setting s where s.setdatabase = d.oid and s.setrole <> 0),
  extract(epoch from now())::float8,
  (select s.setconfig from pg_db_role_setting s where s.setdatabase = d.oid and s.setrole = 0)
from pg_roles r, pg_database d where r.rolname = current_user and d.datname = %s
"""
COPY_TIMEOUT_S = 120  # the copy itself: new connections to the user's database wait on it


def with_dbname(output: dict[str, Any], dbname: str) -> dict[str, Any]:
    """`output` connecting to database `dbname` instead (whichever key the profile used)."""
    moved = {k: v for k, v in output.items() if k not in ("dbname", "database")}
    moved["dbname"] = dbname
    return moved


@dataclass(frozen=True)
class Clone:
    """The incident's database: `name` the clone (None: the user's database, and `why`)."""

    name: str | None
    why: str = ""
    source: str = ""  # the user's database it copies
    made_at: float = 0.0  # when, by the server's clock
    size: int = 0


def _maintenance(output: dict[str, Any]) -> Any:
    """An autocommit connection to a database that is not the user's (`create database`
    cannot copy the database it runs in, nor one this connection holds)."""
    import psycopg2

    user_db = dbname_of(output)
    errors: list[str] = []
    for name in ("postgres", "template1"):
        if name == user_db:
            continue
        try:
            conn = psycopg2.connect(**connect_args(with_dbname(output, name)))
        except psycopg2.Error as exc:
            errors.append(f"{name}: {first_line(exc)}")
            continue
        conn.autocommit = True
        return conn
    raise HarnessError(f"no maintenance database to connect to ({'; '.join(errors)})")


def make_clone(output: dict[str, Any], limit_bytes: int, plan_only: bool = False) -> Clone:
    """A copy of `output`'s database, or Clone(None, why) when Postgres or the limits do not
    allow one (never an exception: the user's database then serves, as without a clone).
    `plan_only`: make nothing; Clone(None, "") where a copy would be made."""
    import psycopg2

    source = dbname_of(output)
    if not source:
        return Clone(None, "the profile names no database")
    try:
        conn = _maintenance(output)
    except (HarnessError, ImportError) as exc:
        return Clone(None, f"cannot connect beside the user's database: {exc}", source)
    try:
        with conn.cursor() as cur:
            cur.execute(_CAN_CLONE, (source,))
            row = cur.fetchone()
            if row is None:
                return Clone(None, f"database {source} is not listed in pg_database", source)
            why = _why_not(row, source, limit_bytes)
            if why or plan_only:
                return Clone(None, why, source)
            size, now, settings = int(row[2]), float(row[6]), list(row[7] or [])
            # no longer than Postgres's own 5 s wait for sessions, and a bounded copy: new
            # connections to the user's database wait while it runs
            cur.execute("set lock_timeout = '5s'")
            cur.execute("select set_config('statement_timeout', %s, false)",
                        (f"{COPY_TIMEOUT_S}s",))  # fmt: skip
            name = f"{CLONE_PREFIX}{secrets.token_hex(6)}"
            try:
                cur.execute(f"create database {quote_ident(name)} template {quote_ident(source)}")
            except psycopg2.Error as exc:
                if exc.pgcode == OBJECT_IN_USE:
                    why = (f"a session connected to database {source} meanwhile, and "
                           f"{ONLY_UNUSED}")  # fmt: skip
                    return Clone(None, why, source)
                return Clone(None, f"the copy failed: {first_line(exc)}", source)
            cur.execute("reset lock_timeout")
            cur.execute("reset statement_timeout")
            try:
                _finish(cur, name, settings, now)
            except psycopg2.Error as exc:  # an unlabelled clone would never be swept
                left = _drop_quietly(cur, name)
                return Clone(None, f"the copy could not be set up ({first_line(exc)}){left}",
                             source)  # fmt: skip
            return Clone(name, "", source, now, size)
    except psycopg2.Error as exc:
        return Clone(None, f"cannot read whether it may be copied: {first_line(exc)}", source)
    finally:
        conn.close()


def _why_not(row: tuple[Any, ...], source: str, limit_bytes: int) -> str:
    """Why `source` (as `_CAN_CLONE` read it) is not copied, or ""."""
    may_create, may_copy, size, others, busy, role_settings = row[:6]
    if not may_create:
        return "the role may not create databases (rolcreatedb)"
    if not may_copy:
        return f"the role does not own database {source}"
    if int(size) > limit_bytes:
        mb, limit = f"{int(size) / 2**20:.0f} MB", f"{limit_bytes / 2**20:.0f} MB"
        return f"database {source} is {mb}, above [sandbox] pg_clone_limit_mb ({limit})"
    if int(others):
        return (f"{others} other session(s) or prepared transaction(s) are on database "
                f"{source}, and {ONLY_UNUSED}")  # fmt: skip
    if busy:
        return f"a vacuum is running on database {source} (a copy would cancel it)"
    if role_settings:
        return (f"database {source} has settings for some roles (ALTER ROLE ... IN DATABASE "
                "... SET), which a copy would not have")  # fmt: skip
    return ""


def _finish(cur: Any, name: str, settings: list[str], now: float) -> None:
    """Label clone `name` with its owner, give it the source's database-wide settings
    (`search_path`, `timezone`, ...: a copy does not take them), and let no other role connect
    to it (a copy is connectable by PUBLIC whatever the source allowed)."""
    cur.execute(f"comment on database {quote_ident(name)} is %s",
                (owner_comment(placed_owner(), now),))  # fmt: skip
    cur.execute(f"revoke all on database {quote_ident(name)} from public")
    for setting in settings:
        key, _, value = setting.partition("=")
        cur.execute(f"alter database {quote_ident(name)} set {quote_ident(key)} = %s", (value,))


def _drop_quietly(cur: Any, name: str) -> str:
    """Drop a clone that could not be set up; "" or a note naming it when that failed too."""
    try:
        _drop(cur, name, force=True)
        return ""
    except Exception as exc:
        return f"; it was not dropped ({first_line(exc)}): drop database {name} by hand"


def _drop(cur: Any, name: str, force: bool) -> None:
    if not CLONE_NAME.fullmatch(name):  # never a database patchit did not make
        raise HarnessError(f"refusing to drop database {name!r}: not a patchit clone")
    cur.execute("select current_setting('server_version_num')::int")
    forced = " with (force)" if force and int(cur.fetchone()[0]) >= 130000 else ""
    cur.execute(f"drop database if exists {quote_ident(name)}{forced}")


def drop_clone(
    output: dict[str, Any], name: str, if_comment: str | None = None, force: bool = True
) -> bool:
    """Drop clone `name` of `output`'s server; with `if_comment`, only while its comment is
    exactly that. `force` ends the sessions still on it (this run's own clone: a dbt process
    of the run may still hold one); without it, a clone in use is kept (a sweep must not cut
    a live run's sessions). Whether it was dropped; HarnessError when it could not be."""
    import psycopg2

    try:
        conn = _maintenance(output)
    except ImportError as exc:
        raise HarnessError("a Postgres sandbox needs psycopg2") from exc
    try:
        with conn.cursor() as cur:
            cur.execute("select shobj_description(oid, 'pg_database') from pg_database "
                        "where datname = %s", (name,))  # fmt: skip
            row = cur.fetchone()
            if row is None or (if_comment is not None and row[0] != if_comment):
                return False
            for attempt in range(3):  # a session of the run itself may still be closing
                try:
                    _drop(cur, name, force)
                    return True
                except psycopg2.Error as exc:
                    if exc.pgcode != OBJECT_IN_USE or attempt == 2:
                        raise HarnessError(f"database {name}: {first_line(exc)}") from exc
                    time.sleep(0.5)
            return False
    except psycopg2.Error as exc:
        raise HarnessError(f"database {name}: {first_line(exc)}") from exc
    finally:
        conn.close()


def clones(output: dict[str, Any]) -> list[tuple[str, str | None, float]]:
    """Every `patchit_db_<12 hex>` database of `output`'s server that this role owns (or is a
    member of its owner): its name, comment, and the server's time now."""
    import psycopg2

    conn = _maintenance(output)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "select datname, shobj_description(oid, 'pg_database'), "
                "extract(epoch from now())::float8 from pg_database where datname ~ %s "
                "and pg_has_role(datdba, 'MEMBER') order by datname",
                (CLONE_NAME.pattern,),
            )
            return [(str(r[0]), None if r[1] is None else str(r[1]), float(r[2]))
                    for r in cur.fetchall()]  # fmt: skip
    except psycopg2.Error as exc:
        raise HarnessError(f"cannot list patchit's databases: {first_line(exc)}") from exc
    finally:
        conn.close()


_REWRITTEN: dict[tuple[str, int, int, int, str, str], bytes] = {}  # one incident's, at most


def rewrite_manifest(source: Path, dest: Path, old: str, new: str) -> None:
    """`source` (the failing run's manifest) written to `dest` with every node and source of
    database `old` placed in `new`: `--defer` then reads the clone's relations, and dbt's
    state comparison sees the sandbox's own parse (whose target is the clone) as unchanged.
    Rewritten once per file version and clone: every candidate of the incident asks."""
    stat = source.stat()
    key = (str(source), stat.st_ino, stat.st_mtime_ns, stat.st_size, old, new)
    text = _REWRITTEN.get(key)  # a baseline thread may ask beside a candidate
    if text is None:
        data = json.loads(source.read_bytes())
        prefix, moved = f"{quote_ident(old)}.", f"{quote_ident(new)}."
        for section in ("nodes", "sources", "functions"):
            entries = data.get(section)
            for node in entries.values() if isinstance(entries, dict) else ():
                if not isinstance(node, dict) or node.get("database") != old:
                    continue
                node["database"] = new
                relation = node.get("relation_name")
                if isinstance(relation, str) and relation.startswith(prefix):
                    node["relation_name"] = moved + relation[len(prefix) :]
        text = json.dumps(data).encode("utf-8")
        _REWRITTEN.clear()
        _REWRITTEN[key] = text
    dest.write_bytes(text)


def names_its_database(manifest: Path | None) -> str:
    """The first model, seed, snapshot or source of the failing run's manifest whose YAML or
    config names its `database:` explicitly, or "": in a copy it would still name the user's
    database, and dbt-postgres refuses cross-database references."""
    if manifest is None:
        return ""
    try:
        data = json.loads(manifest.read_bytes())
    except (OSError, ValueError):
        return ""
    for section, key in (("nodes", "unrendered_config"), ("sources", "unrendered_database")):
        entries = data.get(section)
        for uid, node in sorted(entries.items()) if isinstance(entries, dict) else ():
            if not isinstance(node, dict):
                continue
            named = node.get(key)
            if isinstance(named, dict):
                named = named.get("database")
            if named:
                return str(uid)
    return ""


def clone_plan(output: dict[str, Any], limit_bytes: int) -> str:
    """Why an incident on `output`'s database would get no copy now, or "" when it would
    (`patchit doctor`: nothing is made)."""
    return make_clone(output, limit_bytes, plan_only=True).why

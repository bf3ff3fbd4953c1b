"""A database of patchit's own on Snowflake: one zero-copy clone of the user's database per
incident, where the operator's `[sandbox] sf_role` may create one (`CREATE DATABASE` on the
account), else the sandbox schemas live in the user's database (`patchit.sandbox.snowflake`).

`create database PATCHIT_DB_<12 hex> clone <the user's>` costs nothing until written and
holds, as of that moment, every relation the candidates read: their sandbox schemas are made
in it, `--defer` reads its relations (the failing run's manifest rewritten to name it,
`rewrite_sf_manifest`), and sources resolve into it since the run's profile names it. The
user's database is then only read by the clone statement itself: a candidate's SQL, even SQL
that names the user's schema directly, finds patchit's clone under that schema's name only
when it names the clone's database, and the role needs no `CREATE SCHEMA` on the user's
database. Data loaded meanwhile does not change what candidates and the data check's baseline
read.

The emulator the tests run on (fakesnow 0.12) accepts `create database ... clone` but makes
the clone empty, and does not parse `drop database`. So the clone is completed here: a table
of the schemas the selection reads that the clone lacks is cloned into it (`create table ...
clone`, zero-copy too), a view is made reading the user's (as a cloned view does: dbt writes
fully qualified names), and the isolation line says how many were completed one by one. On
Snowflake the clone lacks nothing and this is a no-op. A database that cannot be dropped is
emptied instead (its schemas dropped) and the report says it is left.

The database's comment names its owner as a sandbox schema's does
(`patchit.sandbox.postgres.owner_comment`). A killed heal's clone is not swept yet (the
sandbox schemas are): it is found by its name and comment, and dropped by hand. The emulator
keeps no database comments.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.sandbox.postgres import owner_comment
from patchit.sandbox.snowflake import SANDBOX_PREFIX, SfWarehouse, ident, literal, quote
from patchit.state.liveness import placed_owner

DATABASE_NAME = re.compile(r"^PATCHIT_DB_[0-9A-F]{12}$")
# schemas a database has of its own, never the user's data
_SYSTEM = frozenset({"INFORMATION_SCHEMA"})


@dataclass(frozen=True)
class OwnDatabase:
    """Where an incident's sandbox schemas live: `name`, patchit's clone of the user's
    database `source` (as the profile spells it), or None (the user's database); `why`: the
    isolation line's words."""

    name: str | None
    source: str
    why: str


def new_name() -> str:
    return f"PATCHIT_DB_{secrets.token_hex(6).upper()}"


def make_own_database(
    warehouse: SfWarehouse, schemas: Iterable[str] | None, owner: str | None = None
) -> OwnDatabase:
    """A zero-copy clone of the user's database (`warehouse`'s, connected as the operator's
    role) holding every relation of `schemas` (None: every schema); OwnDatabase(None, ...) with
    the reason when the role may not create one or it cannot be completed."""
    source = str(warehouse.output.get("database") or "")
    user = warehouse.database
    name = new_name()
    now = float(warehouse.query("select date_part(epoch_second, current_timestamp())")[0][0])
    label = owner_comment(owner or placed_owner(), now)
    try:
        warehouse.query(f"create database {quote(name)} clone {quote(user)}")
    except HarnessError as exc:  # no CREATE DATABASE on the account, most likely
        return OwnDatabase(None, source, f"no database of patchit's own: the clone of "
                                         f"database {user} was refused ({exc})")  # fmt: skip
    # its owner, for whoever finds a killed heal's (a clone takes no comment clause); the
    # emulator keeps no comments, and sometimes fails the statement: the label is optional
    with contextlib.suppress(HarnessError):
        warehouse.query(f"comment on database {quote(name)} is {literal(label)}")
    try:
        completed = complete_clone(warehouse, name, schemas)
    except HarnessError as exc:
        left = drop_database(warehouse, name)
        why = f"the clone of database {user} could not be completed ({exc}){left}"
        return OwnDatabase(None, source, f"no database of patchit's own: {why}")
    why = f"{name}, patchit's zero-copy clone of database {user}, dropped afterwards"
    if completed:
        why += (f" (the server's database clone lacked {completed} relation(s) of the schemas "
                "read, cloned one by one: the emulator's database clones are empty)")  # fmt: skip
    return OwnDatabase(name, source, why)


def _relations(warehouse: SfWarehouse, database: str) -> dict[tuple[str, str], str]:
    """(schema, name) -> "VIEW" | "TABLE" of every relation of `database` (the emulator lists
    views only in information_schema.views, Snowflake in both)."""
    info = f"{quote(database)}.information_schema"
    views = warehouse.query(f"select table_schema, table_name from {info}.views")
    found = {(str(s), str(n)): "VIEW" for s, n in views}
    for schema, name in warehouse.query(f"select table_schema, table_name from {info}.tables"):
        found.setdefault((str(schema), str(name)), "TABLE")
    return {k: v for k, v in found.items() if k[0] not in _SYSTEM}


def complete_clone(warehouse: SfWarehouse, name: str, schemas: Iterable[str] | None) -> int:
    """Clone into database `name` what the user's database holds in `schemas` (None: all but
    patchit's sandboxes) and the clone lacks; how many relations were missing."""
    check_name(name)
    user = warehouse.database
    wanted = None if schemas is None else {ident(s) for s in schemas}
    have = _relations(warehouse, name)
    missing = 0
    made: set[str] = set()
    for (schema, relation), kind in sorted(_relations(warehouse, user).items()):
        if (wanted is not None and schema not in wanted) or schema.startswith(SANDBOX_PREFIX):
            continue
        if (schema, relation) in have:
            continue
        missing += 1
        dest_schema = f"{quote(name)}.{quote(schema)}"
        if schema not in made:
            warehouse.query(f"create schema if not exists {dest_schema}")
            made.add(schema)
        dest = f"{dest_schema}.{quote(relation)}"
        src = f"{quote(user)}.{quote(schema)}.{quote(relation)}"
        try:
            if kind == "TABLE":
                warehouse.query(f"create table {dest} clone {src}")
            else:
                warehouse.query(f"create view {dest} as select * from {src}")
        except HarnessError as exc:
            raise HarnessError(f"{kind.lower()} {user}.{schema}.{relation}: {exc}") from exc
    return missing


def drop_database(warehouse: SfWarehouse, name: str) -> str:
    """Drop patchit's database `name`; "" when dropped, else what the report says of it (the
    emulator does not parse `drop database`: its schemas are dropped instead)."""
    check_name(name)
    try:
        warehouse.query(f"drop database if exists {quote(name)}")
        return ""
    except HarnessError as exc:
        refused = str(exc)
    try:
        rows = warehouse.query(f"select schema_name from {quote(name)}.information_schema.schemata")
        for (schema,) in rows:
            if str(schema) not in _SYSTEM:
                warehouse.query(f"drop schema if exists {quote(name)}.{quote(str(schema))} cascade")
    except HarnessError as exc:
        return (f"; database {name} left as it is: it could not be dropped ({refused}) "
                f"nor emptied ({exc})")  # fmt: skip
    return f"; database {name} left empty: the server refused `drop database` ({refused})"


def rewrite_sf_manifest(source: Path, dest: Path, old: str, new: str) -> None:
    """`source` (the failing run's manifest) written to `dest` with every node and source of
    the user's database `old` placed in patchit's `new`, so `--defer` reads the clone's
    relations. Snowflake folds unquoted names to upper case: `old` is matched so."""
    data: dict[str, Any] = json.loads(source.read_bytes())
    folded = ident(old)
    prefixes = (f"{old}.", f"{folded}.", f"{quote(old)}.", f"{quote(folded)}.")
    for section in ("nodes", "sources", "functions"):
        entries = data.get(section)
        for node in entries.values() if isinstance(entries, dict) else ():
            if not isinstance(node, dict) or ident(str(node.get("database") or "")) != folded:
                continue
            node["database"] = new
            relation = node.get("relation_name")
            if isinstance(relation, str):
                for prefix in prefixes:
                    if relation.upper().startswith(prefix.upper()):
                        node["relation_name"] = f"{new}.{relation[len(prefix) :]}"
                        break
    dest.write_text(json.dumps(data), encoding="utf-8")


def check_name(name: str) -> None:
    if not DATABASE_NAME.match(name):  # never a database patchit did not make
        raise HarnessError(f"refusing to touch database {name!r}: not patchit's own")

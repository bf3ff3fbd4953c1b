"""Upstream columns of a Postgres target, read from the user's `information_schema.columns`.

The Postgres form of the DuckDB snapshot lookup in `patchit.evidence.dbt`: one read-only
query on patchit's own connection (credentials from the dbt profile, as the sandbox resolves
them, see `patchit.sandbox.postgres`), after the user's failing run exited, so it sees the
relations that run left, as a DuckDB snapshot holds them. A relation is looked up where the
failing run's manifest says dbt reads it (its schema and identifier); without a manifest node,
in the target's schema, else in the one schema that has it. patchit's sandbox schemas and
the system's (`pg_*`, `information_schema`) are never read as the user's.

A server that cannot be reached, or refuses the query, gives no columns and a note: the
evidence then falls back to the artifacts' columns, as it does without a DuckDB file.

`pg_function_names` reads, the same way, the names of the functions the target's connection
can call unqualified (Postgres names no near function in its "function ... does not exist":
the message fix-it looks for one).
"""

from __future__ import annotations

from typing import Any

from patchit.errors import PatchitError
from patchit.events.model import UniversalFailureEvent
from patchit.sandbox.postgres import SANDBOX_PREFIX, PgWarehouse, dbname_of, is_postgres

# Evidence must not hang on a server that does not answer (the profile's own value wins)
EVIDENCE_CONNECT_TIMEOUT_S = 5

# What to look up: (evidence name, manifest node or {} when unknown, identifier)
Lookup = tuple[str, dict[str, Any], str]


def postgres_output(event: UniversalFailureEvent) -> dict[str, Any] | None:
    """The failing run's profile output when it is a Postgres target; None otherwise (and
    when the profile cannot be resolved: other evidence says what is wrong with it)."""
    output = _target_output(event)
    return output if output is not None and is_postgres(output) else None


def snowflake_output(event: UniversalFailureEvent) -> dict[str, Any] | None:
    """The failing run's profile output when it is a Snowflake target; None otherwise."""
    from patchit.sandbox.snowflake import is_snowflake

    output = _target_output(event)
    return output if output is not None and is_snowflake(output) else None


def _target_output(event: UniversalFailureEvent) -> dict[str, Any] | None:
    if event.dbt is None:
        return None
    from patchit.sandbox.dbt_profile import resolve_dbt_target

    try:
        return resolve_dbt_target(event).output
    except PatchitError:
        return None


def _place(node: dict[str, Any], table: str) -> tuple[str | None, str]:
    """(schema, identifier) the manifest node names (schema None: not known)."""
    schema = node.get("schema")
    name = node.get("identifier") or node.get("alias") or table
    return (str(schema) if schema else None), str(name)


def pg_upstream_columns(
    output: dict[str, Any], lookups: list[Lookup], notes: list[str]
) -> dict[str, tuple[str, list[str]]]:
    """{evidence name: (database.schema.table, columns in order)} for the relations found;
    a note for a server that cannot answer, never an exception."""
    dbname = dbname_of(output)
    target_schema = str(output.get("schema") or "public")
    places: dict[str, tuple[str | None, str]] = {}
    for name, node, table in lookups:
        database = node.get("database")
        if database and dbname and str(database) != dbname:
            continue  # another database: not reachable on this connection
        places[name] = _place(node, table)
    if not places:
        return {}
    timeout = output.get("connect_timeout") or EVIDENCE_CONNECT_TIMEOUT_S
    warehouse = PgWarehouse({**output, "connect_timeout": timeout}, purpose="column evidence")
    try:
        rows = warehouse.query(
            "select table_schema, table_name, column_name from information_schema.columns "
            "where lower(table_name) = any(%s) and table_schema <> 'information_schema' "
            r"and table_schema not like 'pg\_%%' and table_schema not like %s "
            "order by table_schema, table_name, ordinal_position",
            (
                sorted({ident.lower() for _, ident in places.values()}),
                SANDBOX_PREFIX.replace("_", r"\_") + "%",
            ),
        )
    except PatchitError as exc:
        notes.append(f"no upstream columns from the Postgres target: {exc}")
        return {}
    finally:
        warehouse.close()
    found: dict[tuple[str, str], list[str]] = {}
    for schema, table, column in rows:
        found.setdefault((str(schema), str(table)), []).append(str(column))
    out: dict[str, tuple[str, list[str]]] = {}
    for name, (schema, ident) in places.items():
        where = _choose(found, schema, ident, target_schema)
        if where is None:
            continue
        out[name] = (f"{dbname}.{where[0]}.{where[1]}", found[where])
    return out


def _choose(
    found: dict[tuple[str, str], list[str]], schema: str | None, ident: str, target: str
) -> tuple[str, str] | None:
    """The relation meant: exactly where the manifest says; else in the target's schema; else
    the one schema that has it (several: none, rather than another environment's)."""
    same = [key for key in found if key[1] == ident] or [
        key for key in found if key[1].lower() == ident.lower()
    ]
    if schema is not None:
        return next((key for key in same if key[0] == schema), None)
    in_target = [key for key in same if key[0] == target]
    if in_target:
        return in_target[0]
    return same[0] if len(same) == 1 else None


def pg_function_names(output: dict[str, Any]) -> frozenset[str] | None:
    """The functions a connection to the target calls unqualified (`pg_proc` entries visible
    in its search path, the built-ins with them); None when the server cannot answer."""
    timeout = output.get("connect_timeout") or EVIDENCE_CONNECT_TIMEOUT_S
    warehouse = PgWarehouse({**output, "connect_timeout": timeout}, purpose="function names")
    try:
        rows = warehouse.query(
            "select distinct proname from pg_proc where pg_function_is_visible(oid)"
        )
    except PatchitError:
        return None
    finally:
        warehouse.close()
    return frozenset(str(row[0]) for row in rows)

"""The dbt harness on a Postgres target: sandbox schemas per candidate, and the guard that
keeps every build inside them (see `patchit.sandbox.postgres`).

The guard lists, with `dbt ls`, the schema every selected model, seed and snapshot would be
built into, before `dbt build` runs. A project whose `generate_schema_name` ignores the target's
schema for some model (e.g. "custom schema as is") would otherwise build that model into the
user's own schema: such a candidate is refused, and nothing is built.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.harnesses.dbt.pg_schemas import PgSchemas as PgSchemas  # re-exported
from patchit.harnesses.dbt.pg_schemas import manifest_relations
from patchit.harnesses.dbt.units import DbtOutcome, DbtSandbox
from patchit.sandbox.pg_role import admit
from patchit.sandbox.postgres import PgWarehouse, dbname_of

# What the guard lists: what a build writes, and tests (their stored failures are written to
# `<schema>_dbt_test__audit`, named by the same macro)
BUILT = ("model", "seed", "snapshot", "test")
# What it lists of each: where it is built, and whether it is built on top of what is there
LISTED_KEYS = ("unique_id", "schema", "alias", "resource_type", "config")
NOTHING_SELECTED = "No nodes selected!"  # dbt's line for an empty selection: nothing is built
UNVERIFIED = "its incremental branch is not verified"


def _builds_on_itself(node: dict[str, Any], full_refresh: bool) -> bool:
    """A snapshot (a full refresh does not rebuild it), or an incremental model the run does
    not rebuild: configured `full_refresh: false`, or not `full_refresh: true` in a run
    without `--full-refresh`. Its run reads and writes the relation it already has."""
    config = node.get("config")
    config = config if isinstance(config, dict) else {}
    if node.get("resource_type") == "snapshot":
        return True
    if node.get("resource_type") != "model" or config.get("materialized") != "incremental":
        return False
    if config.get("full_refresh") is not None:
        return config.get("full_refresh") is False
    return not full_refresh


def _suffix(schema: str, base: str) -> str | None:
    """dbt's custom part of `schema` built from target schema `base` ("" for `base`
    itself), None when `schema` is not one of them (a custom `generate_schema_name`)."""
    if schema == base:
        return ""
    return schema[len(base) :] if schema.startswith(f"{base}_") else None


def seed_incrementals(
    box: DbtSandbox, nodes: list[dict[str, Any]], warehouse: PgWarehouse, limit_bytes: int
) -> list[str]:
    """Copy the user's table of every selected incremental model and snapshot (`nodes`, as
    `dbt ls` listed them) to where the sandbox build writes it, within `limit_bytes` in all.
    dbt then takes the incremental branch (`is_incremental()`) and merges into the rows the
    user's run had, as the user's run did; from an empty schema it would build the model from
    scratch, and a failure of the incremental branch would not reproduce. A node whose relation the
    candidate renamed or moved is built from scratch, as the user's run would build it.
    Returns the report's lines: what was copied, and what was built from scratch and why."""
    assert box.pg_schema is not None
    full_refresh = "--full-refresh" in box.args
    wanted = [n for n in nodes if _builds_on_itself(n, full_refresh)]
    if not wanted:
        return []
    # the copy `--defer` reads, not the user's target dir (which their next run rewrites)
    user = manifest_relations(box.state_manifest) if box.state_manifest else {}
    dbname = dbname_of(warehouse.output)
    target = str(warehouse.output.get("schema") or "public")
    notes: list[str] = []
    spent = 0  # the limit is the run's, over all its copies
    for node in wanted:
        name = str(node["unique_id"]).rpartition(".")[2]
        database, schema, alias = user.get(str(node["unique_id"]), ("", "", ""))
        dest = (str(node.get("schema") or ""), str(node.get("alias") or alias))
        why = ""
        if not schema or not alias or (database and dbname and database != dbname):
            why = "the failing run's manifest places it in no relation of this database"
        elif dest[1] != alias or _suffix(dest[0], box.pg_schema) != _suffix(schema, target):
            why = f"the candidate moves it from {schema}.{alias}: the user's run would too"
        if why:
            notes.append(f"{name} built from scratch ({why}): {UNVERIFIED}")
            continue
        try:
            left = limit_bytes - spent
            copied = warehouse.copy_table(box.pg_schema, (schema, alias), dest, left,
                                          owner=box.pg_role)  # fmt: skip
        except HarnessError as exc:
            notes.append(f"{name} built from scratch (the copy of {schema}.{alias} failed: "
                         f"{exc}): {UNVERIFIED}")  # fmt: skip
            continue
        if copied.rows is None:
            budget = spent and left < copied.size <= limit_bytes  # it fitted the whole limit
            spent_note = f", after {spent / 2**20:.1f} MB copied for this run" if budget else ""
            notes.append(f"{name} built from scratch ({copied.why}{spent_note}): {UNVERIFIED}")
        else:
            spent += copied.size
            only = ", its rows only: no constraints or indexes" if copied.rows_only else ""
            notes.append(f"{name} built on a copy of {schema}.{alias} ({copied.rows} rows{only})")
    return notes


def listing_args(build_args: list[str]) -> list[str]:
    """`dbt ls` over what `build_args` (a `dbt build ...` argv) selects, one JSON object per
    model, seed, snapshot and test with its schema."""
    assert build_args and build_args[0] == "build"
    args = ["ls", *build_args[1:]]
    for kind in BUILT:
        args += ["--resource-type", kind]
    return [*args, "--output", "json", "--output-keys", *LISTED_KEYS]


def listed_nodes(listing: str) -> list[dict[str, Any]]:
    """The nodes of a `dbt ls --output json` log: its JSON lines with a unique_id."""
    nodes: list[dict[str, Any]] = []
    for line in listing.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            node = json.loads(line)
        except ValueError:
            continue
        if isinstance(node, dict) and "unique_id" in node:
            nodes.append(node)
    return nodes


def check_schemas(listing: str, schema: str) -> list[dict[str, Any]]:
    """The nodes `dbt ls` listed, all of them in `schema` or one of dbt's `<schema>_<custom>`
    schemas; HarnessError naming the first that is not, or when it listed nothing without
    saying that nothing was selected (a listing that was not read)."""
    nodes = listed_nodes(listing)
    for node in nodes:
        where = str(node.get("schema") or "")
        if where != schema and not where.startswith(f"{schema}_"):
            raise HarnessError(
                f"{node['unique_id']} would be built into schema {where!r}, outside patchit's "
                f"sandbox schema {schema!r} (a custom generate_schema_name?); refusing to build"
            )
    if not nodes and NOTHING_SELECTED not in listing:
        raise HarnessError("dbt ls listed no node of the sandbox build; refusing to build blind")
    return nodes


def guard_schemas(
    box: DbtSandbox, run: Callable[[list[str], Path], DbtOutcome]
) -> list[dict[str, Any]]:
    """`dbt ls` first (with `run`, the harness's way of running dbt): every node the build
    would write must land in the sandbox schema; HarnessError otherwise. Returns the listed
    nodes."""
    assert box.pg_schema is not None
    log = box.log_path.with_name("dbt_ls.log")
    log.unlink(missing_ok=True)
    listed = run(listing_args(box.args), log)
    listing = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    if not listed.success:
        tail = "\n".join(listing.strip().splitlines()[-5:])
        raise HarnessError(f"dbt ls could not list the sandbox build's schemas: {tail}")
    return check_schemas(listing, box.pg_schema)


def admit_built(box: DbtSandbox, nodes: list[dict[str, Any]], warehouse: PgWarehouse) -> None:
    """Under a restricted role, dbt's `<sandbox>_<custom>` schemas of the listed `nodes`
    made for it by patchit (the role may create no schema itself)."""
    if box.pg_role is None or box.pg_schema is None:
        return
    customs = {str(node.get("schema") or "") for node in nodes} - {box.pg_schema, ""}
    if customs:
        admit(warehouse, box.pg_role, sorted(customs))


def warehouse_note(box: DbtSandbox) -> str:
    """What the isolation line adds for a server warehouse: where the run wrote and read."""
    if box.pg_schema is None:
        return ""
    seeded = "".join(f"; {note}" for note in box.pg_notes)
    clone = box.pg_clone
    if clone is not None and clone.name is not None:
        made = datetime.fromtimestamp(clone.made_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        where = (
            f"built in schema {box.pg_schema} of {clone.name}, patchit's copy of database "
            f"{clone.source} made {made} ({clone.size / 2**20:.1f} MB), dropped afterwards"
        )
        read = "from the copy"
    else:
        where = f"built in schema {box.pg_schema}, dropped afterwards"
        read = "live from the user's relations"
    upstream = (
        f"read {read} (--defer)"
        if "--defer" in box.args
        else "built in the sandbox schema too (no manifest to defer to)"
    )
    why = f"; no copy of the database: {clone.why}" if clone is not None and clone.why else ""
    role = "" if box.pg_role is None else (
        f"; run as role {box.pg_role}, which can write only its sandbox schemas")  # fmt: skip
    return f"; Postgres: {where}; upstream {upstream}{seeded}{why}{role}"


def pg_outputs(box: DbtSandbox) -> dict[str, str]:
    """What a run's Verification says of where its outputs are: the sandbox schema, and the
    database it is in when that is patchit's copy (the data check reads them there)."""
    if box.pg_schema is None:
        return {}
    found = {"pg_schema": box.pg_schema}
    if box.pg_clone is not None and box.pg_clone.name is not None:
        found["pg_dbname"] = box.pg_clone.name
    return found

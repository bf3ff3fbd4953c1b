"""The column types of the sources a green dbt run read, kept with its last good commit.

An upstream schema change (the loader now delivers `priceEach` as text) breaks a model whose
SQL did not change. The warehouse cannot say later what the types were: it holds only the new
table, and dbt's artifacts carry no column types. So a green run on DuckDB records them, read in
dbt's own process through the connection dbt-duckdb still holds once the run is done (no second
open of the user's file, which would lock out the user's next run), for the sources of the
run's fresh manifest. A later failure compares them with the incident's snapshot of the
warehouse (`evidence.type_drift.warehouse_type_changes`).

Recorded as JSON: `{"<source>.<table>": {"relation": "<db>.<schema>.<identifier>",
"columns": {"<column>": "<TYPE>"}}}`. Other adapters record nothing yet.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

MAX_SOURCES = 2_000


def run_sources(manifest: Path) -> dict[str, tuple[str, str, str]]:
    """`<source>.<table>` -> (database, schema, identifier) of a manifest.json's sources of the
    root project and its packages ({} when unreadable)."""
    from patchit.evidence.unit_files import read_manifest

    found: dict[str, tuple[str, str, str]] = {}
    for source in (read_manifest(manifest).get("sources") or {}).values():
        if not isinstance(source, dict):
            continue
        parts = [source.get(k) for k in ("database", "schema", "identifier")]
        name = f"{source.get('source_name')}.{source.get('name')}"
        if all(isinstance(p, str) and p for p in parts):
            found[name] = (str(parts[0]), str(parts[1]), str(parts[2]))
        if len(found) >= MAX_SOURCES:
            break
    return found


def recorded_types(conn: Any, manifest: Path) -> str | None:
    """The JSON record of the manifest's sources' column types through `conn`; None when
    there are none to record."""
    from patchit.evidence.type_drift import columns_by_relation

    sources = run_sources(manifest)
    columns = columns_by_relation(conn, set(sources.values()))
    record = {
        name: {"relation": ".".join(rel), "columns": columns[rel]}
        for name, rel in sorted(sources.items())
        if rel in columns
    }
    return json.dumps(record, sort_keys=True) if record else None


def duckdb_source_types(manifest: Path | None) -> str | None:
    """In dbt's process after a green run: the record, through the DuckDB connection
    dbt-duckdb still holds (None on any other adapter, or when anything fails: a green run's
    record never fails for want of it)."""
    connections = sys.modules.get("dbt.adapters.duckdb.connections")  # loaded by a DuckDB run
    env = getattr(getattr(connections, "DuckDBConnectionManager", None), "_ENV", None)
    conn = getattr(env, "conn", None)
    if conn is None or manifest is None:
        return None
    try:
        cursor = conn.cursor()
        try:
            return recorded_types(cursor, manifest)
        finally:
            cursor.close()
    except Exception as exc:  # the record is a convenience: the run is green whatever happens
        print(f"patchit: could not read the sources' column types ({exc})", file=sys.stderr)
        return None


def run_manifest(args: list[str], invocation_id: object) -> Path | None:
    """The manifest.json a dbt invocation with `args` wrote (its metadata names
    `invocation_id`), when it is a full `dbt build` (only that one is recorded as last good)."""
    import os

    from patchit.text.dbt_args import is_full_build, option_value

    if not is_full_build(args) or not isinstance(invocation_id, str):
        return None
    project = Path(option_value(args, "--project-dir") or os.environ.get("DBT_PROJECT_DIR") or ".")
    target = option_value(args, "--target-path") or os.environ.get("DBT_TARGET_PATH") or "target"
    manifest = project / target / "manifest.json"
    return manifest if invocation_of(manifest) == invocation_id else None


# dbt writes `metadata` first: {"metadata": {..., "invocation_id": "<uuid>", ...
_INVOCATION = re.compile(rb'"invocation_id":\s*"([^"]+)"')


def invocation_of(artifact: Path) -> str | None:
    """The invocation id in a dbt artifact's metadata (read from its first few KB)."""
    try:
        with artifact.open("rb") as handle:
            head = handle.read(8192)
    except OSError:
        return None
    found = _INVOCATION.search(head)
    return found.group(1).decode("utf-8", "replace") if found else None

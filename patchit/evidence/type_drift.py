"""Which columns read from outside the repo changed type since the last good run.

An upstream schema change (the EL sync now delivers `created` as a timestamp, not epoch
seconds) breaks a model whose SQL did not change, often one in a package under
`dbt_packages/`. It is the data's fault, and the report should say which column moved from
which type to which.

Where the last good run's types are read: from the data files the breaking change edited (a
landing or seed file the run loads), typed at the last good commit and at the failing one by
the reader the warehouse uses (DuckDB's CSV/JSON sniffer). The warehouse cannot say: it holds
only the new table, and dbt's artifacts carry no column types (catalog.json exists only after a
`dbt docs generate`). Each side is typed the same way, so the sniffer's choices cancel out:
what differs is what the data now is.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence, TypeChange
from patchit.evidence.unit_files import read_manifest
from patchit.sandbox.git import show_file

_READERS = {".csv": "read_csv", ".tsv": "read_csv", ".json": "read_json",
            ".jsonl": "read_json", ".ndjson": "read_json"}  # fmt: skip
_MAX_BYTES = 5_000_000


def _types_of(text: str, suffix: str, notes: list[str]) -> dict[str, str] | None:
    """column -> type of a data file's text, as DuckDB's reader types it; None when unread."""
    try:
        import duckdb
    except ImportError:
        return None
    with tempfile.TemporaryDirectory(prefix="patchit-types-") as tmp:
        path = Path(tmp) / f"data{suffix}"
        path.write_text(text, encoding="utf-8")
        try:
            with duckdb.connect() as con:
                rows = con.execute(
                    f"describe select * from {_READERS[suffix]}(?)", [str(path)]
                ).fetchall()
        except duckdb.Error as exc:
            notes.append(f"could not type a data file: {str(exc).splitlines()[0]}")
            return None
    return {str(r[0]): str(r[1]) for r in rows}


def _relation_name(evidence: Evidence, path: str) -> str:
    """The source a landing file feeds (`stripe.charge` for .../stripe/charge.csv), else the
    file's path."""
    stem = Path(path).stem.lower()
    parent = Path(path).parent.name.lower()
    hits = [(s, t) for s, t in evidence.index.sources if t.lower() == stem]
    best = next(((s, t) for s, t in hits if s.lower() == parent), hits[0] if hits else None)
    return f"{best[0]}.{best[1]} ({path})" if best else path


def data_file_type_changes(
    evidence: Evidence, repo: Path, base: str | None, head: str, notes: list[str]
) -> list[TypeChange]:
    """The columns whose type differs between `base` and `head` in the changed data files."""
    if base is None:
        return []
    changes: list[TypeChange] = []
    for path in evidence.changed_files:
        suffix = Path(path).suffix.lower()
        if suffix not in _READERS or Path(path).stem in evidence.index.seeds:
            continue  # a seed is the project's own relation: its change is no upstream drift
        old_text, new_text = show_file(repo, base, path), show_file(repo, head, path)
        if old_text is None or new_text is None:
            continue  # added, deleted or not UTF-8 text: no type to compare
        if max(len(old_text), len(new_text)) > _MAX_BYTES:
            notes.append(f"{path}: too large to type its columns")
            continue
        old = _types_of(old_text, suffix, notes)
        new = _types_of(new_text, suffix, notes)
        if old is None or new is None:
            continue
        relation = _relation_name(evidence, path)
        for column, was in old.items():
            now = new.get(column)
            if now is not None and now != was:
                changes.append(TypeChange(relation=relation, column=column, old=was, new=now))
    return changes


def columns_by_relation(
    conn: Any, relations: set[tuple[str, str, str]]
) -> dict[tuple[str, str, str], dict[str, str]]:
    """Column -> type of each of `relations` a DuckDB connection can see (identifiers
    compared case-folded, as DuckDB does)."""
    if not relations:
        return {}
    catalogs = sorted({db.lower() for db, _schema, _name in relations})
    schemas = sorted({schema.lower() for _db, schema, _name in relations})
    wanted = {(d.lower(), s.lower(), n.lower()): (d, s, n) for d, s, n in relations}
    rows = conn.execute(
        "select table_catalog, table_schema, table_name, column_name, data_type"
        " from information_schema.columns where lower(table_catalog) in"
        f" ({', '.join('?' * len(catalogs))}) and lower(table_schema) in"
        f" ({', '.join('?' * len(schemas))}) order by ordinal_position",
        [*catalogs, *schemas],
    ).fetchall()
    found: dict[tuple[str, str, str], dict[str, str]] = {}
    for catalog, schema, table, column, data_type in rows:
        key = wanted.get((str(catalog).lower(), str(schema).lower(), str(table).lower()))
        if key is not None:
            found.setdefault(key, {})[str(column)] = str(data_type)
    return found


def warehouse_type_changes(
    recorded: str | None, db_snapshot: Path | None, notes: list[str]
) -> list[TypeChange]:
    """The sources' columns whose type in the incident's DuckDB snapshot differs from the last
    good build's (`intake.source_types`): a column dropped or added is not a type change."""
    if not recorded or db_snapshot is None or not db_snapshot.is_file():
        return []
    try:
        import duckdb
    except ImportError:
        return []
    try:
        before = json.loads(recorded)
        wanted: dict[tuple[str, str, str], str] = {}
        for name, entry in before.items():
            parts = tuple(str(entry["relation"]).split("."))
            if len(parts) == 3:
                wanted[(parts[0], parts[1], parts[2])] = name
        with duckdb.connect(str(db_snapshot), read_only=True) as con:
            now = columns_by_relation(con, set(wanted))
    except (ValueError, TypeError, KeyError, AttributeError, duckdb.Error) as exc:
        notes.append(f"could not compare the sources' column types: {str(exc).splitlines()[0]}")
        return []
    changes: list[TypeChange] = []
    for relation, name in sorted(wanted.items()):
        was_columns = before[name].get("columns") or {}
        for column, now_type in now.get(relation, {}).items():
            was = was_columns.get(column)
            if isinstance(was, str) and was != now_type:
                changes.append(TypeChange(relation=name, column=column, old=was, new=now_type))
    return changes


def upstream_sources(manifest: dict[str, Any], unit_id: str) -> set[str] | None:
    """`<source>.<table>` of every source upstream of `unit_id` in a manifest.json (a test:
    of what it tests); None when the manifest does not know the unit."""
    nodes = manifest.get("nodes") or {}
    sources = manifest.get("sources") or {}
    if unit_id not in nodes:
        return None
    found: set[str] = set()
    todo, seen = [unit_id], set()
    while todo:
        uid = todo.pop()
        if uid in seen:
            continue
        seen.add(uid)
        if uid in sources:
            source = sources[uid] or {}
            found.add(f"{source.get('source_name')}.{source.get('name')}")
            continue
        depends = (nodes.get(uid) or {}).get("depends_on") or {}
        todo += [str(d) for d in depends.get("nodes") or []]
    return found


def source_type_changes(
    event: UniversalFailureEvent, recorded: str | None, db_snapshot: Path, notes: list[str]
) -> list[TypeChange]:
    """`warehouse_type_changes` of the sources upstream of the failing unit (of every source
    when the run left no manifest to say which it reads)."""
    moved = warehouse_type_changes(recorded, db_snapshot, notes)
    manifest = event.artifacts.get("manifest")
    read = upstream_sources(read_manifest(Path(manifest)), event.unit_id) if manifest else None
    return [c for c in moved if read is None or c.relation in read]

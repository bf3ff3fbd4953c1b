"""A candidate's DuckDB warehouse as the relations its run reads, not a copy of the whole file.

Copying the incident snapshot for every candidate costs what the project weighs, not what the
selection builds: 845 MB for a 2,000-model project whose fix builds nine models. So, where it
is safe to know what a run reads, the candidate gets a fresh DuckDB file (named as the user's:
dbt-duckdb names the catalog after it) holding copies of just those relations, read from the
snapshot attached READ_ONLY. The profile is unchanged, so the failing run's parse stays valid.

What a run reads, over-approximated from the failing run's manifest (`SliceGraph`):
- the nodes each selector can reach (`name+`: the node and its descendants; `@x`: with their
  ancestors; `path:<file>+`; `@x,name`: at most `name`), with every test of any of them (dbt's
  eager indirect selection);
- those nodes themselves (an incremental model, a snapshot keep their rows) and their parents,
  through ephemeral models, which are inlined;
- for each node the candidate changed, the `ref()`/`source()` its file names now.

Anything it cannot place gives None and the caller copies the whole snapshot, as before:
`state:modified+`, a name or file the manifest does not hold, a `ref` to one, a project with
`on-run-start`/`on-run-end` hooks (they may read any relation). What a run reads outside the
graph (a table named in raw SQL, a macro listing relations) fails with DuckDB's "Catalog
Error", and the harness then runs the candidate again on the whole copy.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchit.harnesses.dbt.units import DbtOutcome, DbtSandbox
from patchit.sandbox.snapshot import wal_path

Relation = tuple[str, str]  # (schema, identifier), lower case: DuckDB folds them
_SLICE_ALIAS = "__patchit_slice"
SLICE_OF = "duckdb_slice_of"  # Verification.outputs: the snapshot a sliced warehouse came from
_REF = re.compile(r"""\bref\(\s*['"]([^'"]+)['"](?:\s*,\s*['"]([^'"]+)['"])?""")
_SOURCE = re.compile(r"""\bsource\(\s*['"]([^'"]+)['"]\s*,\s*['"]([^'"]+)['"]""")
_MISSING = re.compile(r"Catalog Error: (Table|View) with name \S+ does not exist")


@dataclass
class SliceGraph:
    """What the manifest says about relations: enough to tell what a selection reads."""

    database: str | None = None  # the root project's database (the DuckDB file's catalog)
    relations: dict[str, Relation] = field(default_factory=dict)  # uid -> its relation
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    by_name: dict[str, list[str]] = field(default_factory=dict)  # model/seed/test names
    by_file: dict[str, list[str]] = field(default_factory=dict)  # SQL and YAML paths
    files: dict[str, str] = field(default_factory=dict)  # uid -> its original_file_path
    sources: dict[tuple[str, str], str] = field(default_factory=dict)  # (source, table) -> uid
    ephemeral: set[str] = field(default_factory=set)
    tests: set[str] = field(default_factory=set)
    hooks: bool = False  # on-run-start/-end: they may read anything


def graph_of(data: dict[str, Any]) -> SliceGraph:
    """The slice's graph of a parsed manifest.json."""
    graph = SliceGraph()
    project = (data.get("metadata") or {}).get("project_name")
    nodes: dict[str, Any] = data.get("nodes") or {}
    for uid, node in nodes.items():
        kind = node.get("resource_type")
        if kind == "operation":
            graph.hooks = True
            continue
        parents = tuple(str(p) for p in (node.get("depends_on") or {}).get("nodes") or ())
        graph.parents[uid] = parents
        for parent in parents:
            graph.children.setdefault(parent, []).append(uid)
        graph.by_name.setdefault(str(node.get("name")), []).append(uid)
        path = str(node.get("original_file_path") or "")
        graph.files[uid] = path
        for where in {path, str(node.get("patch_path") or "").split("://")[-1]} - {""}:
            graph.by_file.setdefault(where, []).append(uid)
        if kind == "test":
            graph.tests.add(uid)
        elif (node.get("config") or {}).get("materialized") == "ephemeral":
            graph.ephemeral.add(uid)
        elif kind in ("model", "seed", "snapshot"):
            graph.relations[uid] = _relation(node, "alias")
            if node.get("package_name") == project and graph.database is None:
                graph.database = str(node.get("database") or "") or None
    for uid, source in (data.get("sources") or {}).items():
        graph.relations[uid] = _relation(source, "identifier")
        graph.sources[(str(source.get("source_name")), str(source.get("name")))] = uid
    return graph


def _relation(node: dict[str, Any], key: str) -> Relation:
    return str(node.get("schema") or "").lower(), str(node.get(key) or node["name"]).lower()


def selection_reads(
    graph: SliceGraph, selectors: Iterable[str], changed: Iterable[str], project_dir: Path
) -> set[Relation] | None:
    """The relations a run of `selectors` can read, and those it may write that hold rows;
    None when that cannot be told from the manifest (the caller then copies everything)."""
    if graph.hooks or graph.database is None:
        return None
    reached: set[str] = set()
    for selector in selectors:
        nodes = _resolve(graph, selector)
        if nodes is None:
            return None
        reached |= nodes
    tests = {t for node in reached for t in graph.children.get(node, ()) if t in graph.tests}
    reached |= tests
    read = set(reached)
    for node in reached:
        read |= _read_through(graph, graph.parents.get(node, ()))
    for name in changed:
        for node in graph.by_name.get(name, ()):
            refs = _refs_in(graph, project_dir / graph.files.get(node, ""))
            if refs is None:
                return None
            read |= _read_through(graph, refs)
    return {graph.relations[node] for node in read if node in graph.relations}


def _resolve(graph: SliceGraph, selector: str) -> set[str] | None:
    """The nodes `selector` (as `units.select_units` writes them) can select, or None."""
    if "," in selector:  # `@x,name`: an intersection holds at most `name`
        return _named(graph, selector.rsplit(",", 1)[1])
    ancestors = selector.startswith("@")
    text = selector.lstrip("@")
    descendants = ancestors or text.endswith("+")
    text = text.rstrip("+")
    if text.startswith("path:"):
        path = text.removeprefix("path:").rstrip("/")
        start = {n for f, ns in graph.by_file.items() if f == path or f.startswith(path + "/")
                 for n in ns}  # fmt: skip
    elif ":" in text:
        return None  # state:modified and other methods: dbt decides
    else:
        found = _named(graph, text)
        if found is None:
            return None
        start = found
    if not start:
        return None
    nodes = _closure(graph.children, start) if descendants else set(start)
    return _closure(graph.parents, nodes) if ancestors else nodes


def _named(graph: SliceGraph, name: str) -> set[str] | None:
    found = graph.by_name.get(name)
    return set(found) if found else None


def _closure(edges: dict[str, list[str]] | dict[str, tuple[str, ...]], start: set[str]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _read_through(graph: SliceGraph, parents: Iterable[str]) -> set[str]:
    """`parents`, and the parents of an ephemeral one (its SQL is inlined where it is used)."""
    read: set[str] = set()
    todo = list(parents)
    while todo:
        node = todo.pop()
        if node in read:
            continue
        read.add(node)
        if node in graph.ephemeral:
            todo += graph.parents.get(node, ())
    return read


def _refs_in(graph: SliceGraph, file: Path) -> set[str] | None:
    """The nodes a changed file's `ref()`/`source()` calls name; None for one the manifest
    lacks (a model the candidate added or renamed) or a file that cannot be read."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found: set[str] = set()
    for match in _REF.finditer(text):
        name = match.group(2) or match.group(1)  # ref('package', 'model')
        nodes = [n for n in graph.by_name.get(name, ()) if n not in graph.tests]
        if not nodes:
            return None
        found.update(nodes)
    for match in _SOURCE.finditer(text):
        source = graph.sources.get((match.group(1), match.group(2)))
        if source is None:
            return None
        found.add(source)
    return found


def slice_database(snapshot: Path, dest: Path, relations: set[Relation], fresh: bool = True) -> int:
    """A fresh DuckDB file at `dest` holding a copy of each of `relations` the snapshot has
    (a view's rows as a table: a copy reads the same rows); returns how many it copied. With
    `fresh` False, `dest` is a slice already, and gains those of `relations` it lacks (the data
    check compares a relation one run built with the other's, which is then the user's).

    The snapshot is attached READ_ONLY under its own catalog name, so a view's fully
    qualified SQL (dbt-duckdb writes `"bench"."main"."x"`) reads the snapshot, and the new file
    as another; it is never written. It stays attached for the next candidate (reading a
    2,000-model snapshot's catalog costs a quarter of a second) until another snapshot is
    sliced or `release_snapshots()`. duckdb.Error when DuckDB cannot (another version's file,
    a view over a database the run attaches itself): the caller copies the whole file then."""
    for stale in (dest, wal_path(dest)) if fresh else ():
        stale.unlink(missing_ok=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _SNAPSHOT_LOCK:
        con, have = _attached(snapshot)
        con.execute(f"attach '{_quoted(dest)}' as {_SLICE_ALIAS}")
        try:
            present = (
                set()
                if fresh
                else {  # a fresh file holds nothing yet
                    (s.lower(), t.lower())
                    for s, t in con.execute(
                        "select schema_name, table_name from duckdb_tables() "
                        "where database_name = ? union all select schema_name, view_name "
                        "from duckdb_views() where database_name = ?",
                        [_SLICE_ALIAS, _SLICE_ALIAS],
                    ).fetchall()
                }
            )
            wanted = sorted(
                (s, t) for s, t in have if (s.lower(), t.lower()) in relations - present
            )
            catalog = _ident(snapshot.stem)
            for schema in sorted({s for s, _ in wanted}):
                con.execute(f"create schema if not exists {_SLICE_ALIAS}.{_ident(schema)}")
            for schema, table in wanted:
                name = f"{_ident(schema)}.{_ident(table)}"
                con.execute(f"create table {_SLICE_ALIAS}.{name} as select * from {catalog}.{name}")
        finally:
            con.execute(f"detach {_SLICE_ALIAS}")
    return len(wanted)


def _attached(snapshot: Path) -> tuple[Any, list[tuple[str, str]]]:
    """The process's DuckDB connection with `snapshot` attached read-only, and its relations;
    attached again when the file changed (a new incident's snapshot at the same path)."""
    import duckdb

    stat = snapshot.stat()
    key = (str(snapshot.resolve()), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    if _SNAPSHOT.get("key") != key:
        _release()
        con = duckdb.connect(":memory:")
        try:
            con.execute(f"attach '{_quoted(snapshot)}' as {_ident(snapshot.stem)} (read_only)")
            have = con.execute(
                "select table_schema, table_name from information_schema.tables "
                "where table_catalog = ?",
                [snapshot.stem],
            ).fetchall()
        except BaseException:
            con.close()
            raise
        _SNAPSHOT.update(key=key, con=con, have=have)
    return _SNAPSHOT["con"], _SNAPSHOT["have"]


def snapshot_relations(snapshot: Path) -> set[str]:
    """`snapshot.warehouse_relations` of an incident snapshot, read from the connection that
    slices it (a 2,000-model snapshot's catalog read once for both, not twice); an empty set
    when DuckDB cannot read it."""
    import duckdb

    try:
        with _SNAPSHOT_LOCK:
            _, have = _attached(snapshot)
    except (duckdb.Error, OSError):
        return set()
    return {table for _, table in have}


def release_snapshots() -> None:
    """Detach the snapshot kept attached for slicing (the harness closes; the file may go)."""
    with _SNAPSHOT_LOCK:
        _release()


def _release() -> None:
    con = _SNAPSHOT.pop("con", None)
    _SNAPSHOT.clear()
    if con is not None:
        con.close()


_SNAPSHOT: dict[str, Any] = {}  # key, con, have: the one snapshot attached (`_attached`)
_SNAPSHOT_LOCK = threading.Lock()


def missed_relation(outcome: DbtOutcome) -> bool:
    """Whether a run failed for a relation its warehouse lacks (DuckDB's "Catalog Error")."""
    texts = [str(r.get("message") or "") for r in outcome.results]
    return any(_MISSING.search(text) for text in [*texts, outcome.exception or ""])


def slice_outputs(box: DbtSandbox) -> dict[str, str]:
    """What a run's Verification says of a sliced warehouse: the snapshot it was cut from."""
    return {} if box.warehouse_slice is None else {SLICE_OF: str(box.warehouse_slice)}


def fill_slice(db: Path, snapshot: Path | None, relations: Iterable[Relation]) -> None:
    """Give a run's sliced warehouse `db` those of `relations` it lacks, from `snapshot` (kept
    for the incident); nothing when it is no slice or the snapshot is gone. The data check
    calls it before comparing: a relation one run built and the other did not is then compared
    with the user's, as on a whole copy."""
    if snapshot is None or not snapshot.is_file() or not db.is_file():
        return
    slice_database(snapshot, db, {(s.lower(), n.lower()) for s, n in relations}, fresh=False)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")

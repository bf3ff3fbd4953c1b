"""The dbt screen: a candidate's changed models bound by DuckDB against a schema-only clone of
their upstream relations, before any dbt run.

For each changed model (or singular test) the failing run's manifest knows, the candidate's
SQL is rendered (`patchit.screen.render`: refs and sources to the manifest's relation names)
and bound with `EXPLAIN` (`patchit.screen.clone`), in dependency order: a changed model that
another changed model reads is given its new columns first. A parser or binder error rejects
the candidate. Whatever the screen cannot build with certainty passes on to the harness:

- no manifest from the failing run, no warehouse snapshot, a target that is not DuckDB;
- a change to anything that shapes relations beyond model SQL: a macro, a seed, a snapshot,
  `dbt_project.yml`, or YAML that declares sources or model configs;
- Jinja beyond `ref`/`source`/`config` (macros, `is_incremental()`, `var()`), or a project
  whose own compiled SQL the light render does not reproduce;
- a model that reads a relation the run rebuilds (the failing node, its descendants, what
  `dbt build` skipped after a failing test) and whose new columns the screen does not know;
- any DuckDB error that is not a parser or binder error (a table or function it lacks).

One `DbtScreen` serves a harness: the manifest index and the clone are made on the first
candidate of an incident (keyed by snapshot and manifest) and reused for the next ones.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.errors import PatchitError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.unit_files import read_manifest
from patchit.sandbox.dbt_profile import resolve_dbt_target
from patchit.screen.clone import BindError, SchemaClone
from patchit.screen.model import Screening
from patchit.screen.python import compile_python
from patchit.screen.render import Rendered, Resolved, Resolver, Unsure, render_model

SQL_CHECK = "DuckDB EXPLAIN of the changed models against a schema-only clone"
PROJECT_FILES = frozenset(
    {"dbt_project.yml", "packages.yml", "dependencies.yml", "profiles.yml", "selectors.yml"}
)
# Property files whose top-level sections cannot change a relation's columns or name.
INERT_SECTIONS = frozenset({
    "version", "models", "seeds", "snapshots", "exposures", "metrics", "semantic_models",
    "saved_queries", "groups", "unit_tests", "analyses", "macros", "data_tests",
})  # fmt: skip
SCREENED_TYPES = ("model", "test")
REF_TYPES = ("model", "seed", "snapshot")


@dataclass(frozen=True)
class Where:
    """The worktree, the dbt project inside it (repo-relative), the incident's snapshot."""

    root: Path
    project: PurePosixPath
    snapshot: Path | None


@dataclass
class Prepared:
    """What every candidate of one incident shares: the manifest's index and the clone."""

    clone: SchemaClone
    manifest_path: str
    project_name: str
    by_path: dict[str, dict[str, Any]]
    by_name: dict[str, list[dict[str, Any]]]
    sources: dict[tuple[str, str], dict[str, Any]]
    children: dict[str, list[str]]
    nodes: dict[str, dict[str, Any]]
    faithful: dict[str, str] = field(default_factory=dict)  # uid -> "" or why not

    def resolve(self, kind: str, args: tuple[str, ...], package: str) -> Resolved:
        if kind == "source":
            if len(args) != 2:
                raise Unsure(f"source() with {len(args)} arguments")
            node = self.sources.get((args[0], args[1]))
            if node is None:
                raise Unsure(f"source {'.'.join(args)} is not in the failing run's manifest")
            name = str(node.get("identifier") or node.get("name"))
        else:
            node = self._ref(args, package)
            name = str(node.get("alias") or node.get("name"))
        relation = node.get("relation_name")
        if not isinstance(relation, str) or not relation:
            raise Unsure(f"{node['unique_id']} has no relation (ephemeral?)")
        self.clone.relation(node.get("database"), str(node.get("schema")), name)
        return Resolved(str(node["unique_id"]), relation)

    def _ref(self, args: tuple[str, ...], package: str) -> dict[str, Any]:
        if len(args) not in (1, 2):
            raise Unsure(f"ref() with {len(args)} arguments")
        found = self.by_name.get(args[-1], [])
        if len(args) == 2:
            found = [n for n in found if n.get("package_name") == args[0]]
        elif len(found) > 1:  # dbt prefers the referencing node's own package
            found = [n for n in found if n.get("package_name") == package] or found
        if len(found) != 1:
            why = "is not in" if not found else "is ambiguous in"
            raise Unsure(f"ref({', '.join(map(repr, args))}) {why} the failing run's manifest")
        if found[0].get("version") is not None:
            raise Unsure(f"ref({args[-1]!r}) names a versioned model")
        return found[0]

    def descendants(self, roots: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = [r for r in roots if r]
        while todo:
            uid = todo.pop()
            if uid not in seen:
                seen.add(uid)
                todo += self.children.get(uid, [])
        return seen

    def skipped_by_tests(self, failed: list[str]) -> list[str]:
        """The children of the models a failing test tests: `dbt build` skipped them, so
        the snapshot holds their last build, not the change's (a rename passed on by a
        `select *` model is not in it yet)."""
        found: list[str] = []
        for uid in failed:
            node = self.nodes.get(uid) or {}
            if node.get("resource_type") != "test":
                continue
            for parent in (node.get("depends_on") or {}).get("nodes") or []:
                found += [c for c in self.children.get(str(parent), []) if c != uid]
        return found

    def close(self) -> None:
        self.clone.close()


class DbtScreen:
    """Screens dbt candidates for one harness; `close()` drops the incident's clone."""

    def __init__(self) -> None:
        self._prepared: Prepared | None = None
        self._key: tuple[str, ...] | None = None
        self._lock = threading.Lock()
        self.clone_ms = 0  # what the latest incident's manifest index and clone cost

    def screen(self, where: Where, event: UniversalFailureEvent, changed: list[str]) -> Screening:
        """Compile the changed Python files, then bind the changed models' SQL."""
        started = time.monotonic()
        python = compile_python(where.root, changed)
        if not python.passed:
            return python
        with self._lock:
            sql = self._screen_sql(where, event, changed)
        parts = [p for p in (python, sql) if p.screened or p.skipped or not p.passed]
        return Screening(
            passed=sql.passed,
            check="; ".join(p.check for p in parts) or "nothing to screen",
            screened=python.screened + sql.screened,
            skipped=python.skipped + sql.skipped,
            reason=sql.reason,
            output=sql.output,
            duration_ms=max(1, int((time.monotonic() - started) * 1000)),
        )

    def close(self) -> None:
        with self._lock:
            if self._prepared is not None:
                self._prepared.close()
            self._prepared, self._key = None, None

    # -- the SQL part ----------------------------------------------------------------------

    def _screen_sql(
        self, where: Where, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        try:
            files = _project_files(where, changed)
            if not any(f.endswith(".sql") for f in files):
                return Screening(check=SQL_CHECK)
            prepared = self._prepare(where, event)
        except Unsure as exc:
            return Screening.nothing(str(exc), SQL_CHECK)
        return _bind_changed(prepared, where, event, files)

    def _prepare(self, where: Where, event: UniversalFailureEvent) -> Prepared:
        manifest = str(event.artifacts.get("manifest") or "")
        if not manifest or not Path(manifest).is_file():
            raise Unsure("no manifest from the failing run to resolve refs with")
        if where.snapshot is None:
            raise Unsure("no warehouse snapshot for this incident")
        key = (str(where.snapshot), manifest, str(Path(manifest).stat().st_mtime_ns))
        if self._prepared is not None and self._key == key:
            return self._prepared
        if self._prepared is not None:
            self._prepared.close()
            self._prepared, self._key = None, None
        started = time.monotonic()
        self._prepared = _index(Path(manifest), _snapshot_file(where.snapshot, event))
        self._key = key
        self.clone_ms = int((time.monotonic() - started) * 1000)
        return self._prepared


def _snapshot_file(snapshot_dir: Path, event: UniversalFailureEvent) -> Path:
    """The incident's copy of the target's DuckDB file (same name as the user's)."""
    try:
        target = resolve_dbt_target(event)
    except PatchitError as exc:
        raise Unsure(f"the dbt target is unknown: {exc}") from exc
    if target.db_path is None:
        raise Unsure("the dbt target has no DuckDB file")
    path = snapshot_dir / target.db_path.name
    if not path.is_file():
        raise Unsure(f"no {target.db_path.name} in the incident's snapshot")
    return path


def _index(manifest_path: Path, snapshot: Path) -> Prepared:
    data = read_manifest(manifest_path)  # parsed once, shared with the evidence and harness
    if not data:
        raise Unsure("the failing run's manifest is unreadable or not a JSON object")
    for macro in (data.get("macros") or {}).values():
        own = not str(macro.get("package_name", "")).startswith("dbt")
        if own and macro.get("name") in ("ref", "source", "config"):
            raise Unsure(f"the project overrides {macro['name']}() ({macro.get('unique_id')})")
    nodes: dict[str, dict[str, Any]] = data.get("nodes") or {}
    by_path: dict[str, dict[str, Any]] = {}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for node in nodes.values():
        kind = node.get("resource_type")
        if kind != "test" or str(node.get("original_file_path", "")).endswith(".sql"):
            by_path.setdefault(str(node.get("original_file_path")), node)
        if kind in REF_TYPES:
            by_name.setdefault(str(node.get("name")), []).append(node)
    sources = {
        (str(s.get("source_name")), str(s.get("name"))): s
        for s in (data.get("sources") or {}).values()
    }
    project = str((data.get("metadata") or {}).get("project_name") or "")
    return Prepared(
        clone=SchemaClone(snapshot),
        manifest_path=str(manifest_path),
        project_name=project,
        by_path=by_path,
        by_name=by_name,
        sources=sources,
        children={k: list(v) for k, v in (data.get("child_map") or {}).items()},
        nodes=nodes,
    )


def _project_files(where: Where, changed: list[str]) -> list[str]:
    """The changed files of the dbt project (project-relative); Unsure when the candidate
    changes one that can shape a relation other than a model's or test's SQL."""
    found: list[str] = []
    for rel in changed:
        path = PurePosixPath(rel)
        if where.project != PurePosixPath(".") and where.project not in path.parents:
            continue  # outside the dbt project: not the SQL screen's business
        inner = path.relative_to(where.project).as_posix()
        if path.name in PROJECT_FILES:
            raise Unsure(f"it changes {rel}")
        elif path.suffix in (".yml", ".yaml"):
            if why := _shaping_yaml(where.root / rel):
                raise Unsure(f"{rel} {why}")
        elif path.suffix not in (".sql", ".md", ".py"):
            raise Unsure(f"it changes {rel}, which may shape a relation")
        found.append(inner)
    return found


def _shaping_yaml(path: Path) -> str:
    """Why this property file may change a relation's name or columns, or ""."""
    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except (OSError, YAMLError, UnicodeDecodeError):
        return "is not YAML the screen can read"
    if data is None:
        return ""
    if not isinstance(data, dict):
        return "is not a property file"
    if extra := sorted(set(map(str, data)) - INERT_SECTIONS):
        return f"declares {', '.join(extra)}"
    for section in ("models", "seeds", "snapshots"):
        for entry in data.get(section) or []:
            if isinstance(entry, dict) and ({"config", "versions"} & entry.keys()):
                return f"configures {section[:-1]} {entry.get('name')!r}"
    return ""


def _bind_changed(
    prepared: Prepared, where: Where, event: UniversalFailureEvent, files: list[str]
) -> Screening:
    screened: list[str] = []
    skipped: list[str] = []
    rendered: dict[str, Rendered] = {}
    modified: list[str] = []  # every node the candidate changes: the run rebuilds them
    for inner in files:
        label = (where.project / inner).as_posix()
        node = prepared.by_path.get(inner)
        if node is not None:
            modified.append(str(node["unique_id"]))
        if not inner.endswith(".sql"):
            continue
        if node is None or node.get("resource_type") not in SCREENED_TYPES:
            return Screening.nothing(
                f"{label} is no model or test the failing run's manifest knows (a macro, a "
                "snapshot, a new file)",
                SQL_CHECK,
            )
        uid = str(node["unique_id"])
        try:
            _check_faithful(prepared, node)
            text = (where.root / label).read_text(encoding="utf-8")
            rendered[uid] = render_model(text, _resolver(prepared, node))
        except (Unsure, OSError, UnicodeDecodeError) as exc:
            skipped.append(f"{label}: {exc}")
    labels = {uid: (where.project / prepared.nodes[uid]["original_file_path"]).as_posix()
              for uid in rendered}  # fmt: skip
    failed = [event.unit_id, *map(str, event.context.get("related_units") or [])]
    rebuilt = prepared.descendants([*failed, *modified, *prepared.skipped_by_tests(failed)])
    readers = {p for r in rendered.values() for p in r.parents}
    shaped: set[str] = set()  # changed models whose new columns the clone now has
    reshapes = bool(readers & rendered.keys())
    with prepared.clone.trial() if reshapes else nullcontext():
        for uid in _in_order(rendered):
            model = rendered[uid]
            stale = [p for p in model.parents if p in rebuilt and p not in shaped]
            if stale:
                skipped.append(f"{labels[uid]}: reads {stale[0]}, which the run rebuilds")
                continue
            try:
                query = prepared.clone.bind(model.sql)
            except BindError as exc:
                return Screening(
                    passed=False,
                    check=SQL_CHECK,
                    screened=[*screened, labels[uid]],
                    skipped=skipped,
                    reason=f"{labels[uid]}: {str(exc).splitlines()[0]}",
                    output=f"{labels[uid]}:\n{exc}",
                )
            except Unsure as exc:
                skipped.append(f"{labels[uid]}: {exc}")
                continue
            screened.append(labels[uid])
            if uid in readers and not model.moves_relation:
                try:
                    prepared.clone.replace(_qualified(prepared, uid), query)
                    shaped.add(uid)
                except Unsure as exc:
                    skipped.append(f"{labels[uid]}: {exc}")
    return Screening(check=SQL_CHECK, screened=screened, skipped=skipped)


def _check_faithful(prepared: Prepared, node: dict[str, Any]) -> None:
    """Unsure unless the light render reproduces dbt's own compiled SQL of this node as the
    failing run compiled it (when it did): a project whose `ref` renders otherwise is not
    screened."""
    uid = str(node["unique_id"])
    if uid not in prepared.faithful:
        why = ""
        raw, compiled = node.get("raw_code"), node.get("compiled_code")
        if isinstance(raw, str) and isinstance(compiled, str):
            try:
                ours = render_model(raw, _resolver(prepared, node)).sql
            except Unsure as exc:
                why = str(exc)
            else:
                if ours.split() != compiled.split():
                    why = "the light render differs from dbt's compiled SQL for it"
        prepared.faithful[uid] = why
    if prepared.faithful[uid]:
        raise Unsure(prepared.faithful[uid])


def _resolver(prepared: Prepared, node: dict[str, Any]) -> Resolver:
    """ref() and source() as `node` sees them (its own package first)."""
    return partial(prepared.resolve, package=str(node.get("package_name") or prepared.project_name))


def _qualified(prepared: Prepared, uid: str) -> str:
    node = prepared.nodes[uid]
    name = str(node.get("alias") or node.get("name"))
    return prepared.clone.relation(node.get("database"), str(node.get("schema")), name)


def _in_order(rendered: dict[str, Rendered]) -> list[str]:
    """Changed models, each after the changed models it reads (a cycle: file order)."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(uid: str) -> None:
        if uid in order or uid in visiting:
            return
        visiting.add(uid)
        for parent in rendered[uid].parents:
            if parent in rendered:
                visit(parent)
        order.append(uid)

    for uid in rendered:
        visit(uid)
    return order

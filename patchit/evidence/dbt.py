"""Evidence for one failed dbt node: its code, its neighbours, its tests, history and index.

Nothing here runs dbt: it reads the repo, the artifacts this run wrote, git and a read-only
copy of the warehouse (a Postgres target: its information_schema, see `pg_columns`, and a
failing test's rows, each read-only). Missing optional pieces become `notes`, never
exceptions, because a parse-time failure leaves most artifacts unwritten.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.conversion import find_conversion
from patchit.evidence.failing_rows import (
    sample_failing_rows,
    sample_failing_rows_pg,
    sample_failing_rows_sf,
)
from patchit.evidence.gitlog import (
    breaking_diff_or_note,
    change_base,
    history_and_changes,
    on_this_line,
)
from patchit.evidence.model import Evidence, ProjectIndex, Relation
from patchit.evidence.pg_columns import pg_upstream_columns, postgres_output, snowflake_output
from patchit.evidence.project_index import index_project, load_yaml_text, read_project_config
from patchit.evidence.redact import dbt_profile_secrets, environment_secrets, redact_model
from patchit.evidence.type_drift import data_file_type_changes
from patchit.evidence.yaml_marks import yaml_error_mark
from patchit.text.inputs import (
    as_dict,
    as_list,
    as_path,
    as_str,
    read_input_json_or_none,
    read_input_text_or_none,
)

_REF = re.compile(
    r"""\bref\(\s*['"]([\w.-]+)['"]\s*(?:,\s*['"]([\w.-]+)['"]\s*)?(?:,\s*v(?:ersion)?\s*=[^)]*)?\)"""
)
_SOURCE = re.compile(r"""\bsource\(\s*['"]([\w.-]+)['"]\s*,\s*['"]([\w.-]+)['"]\s*\)""")


def parse_refs(sql: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Names passed to ref() (the node name of the two-argument form) and source() pairs,
    read from raw Jinja-SQL by regex: the fallback of `code_refs`."""
    refs = [second or first for first, second in _REF.findall(sql)]
    return list(dict.fromkeys(refs)), list(dict.fromkeys(_SOURCE.findall(sql)))


def code_refs(evidence: Evidence) -> tuple[list[str], list[tuple[str, str]]]:
    """The refs and sources the unit reads: from the parse of its compiled SQL (only what it
    really compiled to, no ref in a comment or an untaken branch), else from its raw code."""
    if evidence.compiled_code:
        from patchit.evidence.sql_parse import dbt_refs  # sqlglot: only when a node failed

        own = None if evidence.event.unit_id.startswith("test.") else evidence.unit_name
        parsed = dbt_refs(evidence.compiled_code, evidence.index, own)
        if parsed is not None and (parsed[0] or parsed[1]):
            return parsed
    return parse_refs(evidence.raw_code or "")


def _read(path: Path) -> str | None:
    return read_input_text_or_none(path)


def _rel(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def _read_in_repo(repo_root: Path, rel_path: str) -> str | None:
    """A repo file's text; never follows a path (or symlink) out of the repository."""
    path = repo_root / rel_path
    if not path.resolve().is_relative_to(repo_root.resolve()):
        return None
    return _read(path)


def locate_project(event: UniversalFailureEvent, repo_root: Path) -> Path:
    """The dbt project dir inside `repo_root` (the event may name it in another checkout)."""
    if event.dbt is not None:
        project = Path(event.dbt.project_dir)
        for base in (repo_root, Path(event.repo_path) if event.repo_path else None):
            if base is not None and project.is_relative_to(base):
                candidate = repo_root / project.relative_to(base)
                if (candidate / "dbt_project.yml").is_file():
                    return candidate
    if (repo_root / "dbt_project.yml").is_file():
        return repo_root
    found = sorted(
        (p for p in repo_root.glob("**/dbt_project.yml") if "dbt_packages" not in p.parts),
        key=lambda p: len(p.parts),
    )
    return found[0].parent if found else repo_root


def _load_json(path: str | None) -> dict[str, Any] | None:
    data = read_input_json_or_none(as_path(path))
    return data if isinstance(data, dict) else None


def _node(artifact: dict[str, Any] | None, unique_id: str, kind: str = "nodes") -> dict[str, Any]:
    """One node of a manifest or catalog, {} when it is missing or not an object."""
    return as_dict(as_dict(as_dict(artifact).get(kind)).get(unique_id))


def _compiled_code(
    event: UniversalFailureEvent,
    repo_root: Path,
    project: Path,
    index: ProjectIndex,
    manifest: dict[str, Any] | None,
    notes: list[str],
) -> str | None:
    node = _node(manifest, event.unit_id)
    for code in (event.context.get("compiled_code"), node.get("compiled_code")):
        if isinstance(code, str) and code.strip():
            return code
    if not event.unit_path or not index.project_name:
        return None
    target = str(read_project_config(project).get("target-path", "target"))
    # unit_path is relative to the repo; compiled paths are relative to the project.
    unit_abs = repo_root / event.unit_path
    if not unit_abs.resolve().is_relative_to(project.resolve()):
        return None
    path = project / target / "compiled" / index.project_name / _rel(unit_abs, project)
    if event.unit_id.startswith("test.") and path.suffix in (".yml", ".yaml"):
        path = path / f"{event.unit_id.split('.')[2]}.sql"
    if not path.is_file():
        return None
    started = event.dbt.started_utc if event.dbt else None
    if started is not None and datetime.fromtimestamp(path.stat().st_mtime, UTC) < started:
        notes.append(f"compiled SQL {path.name} predates this run; not used")
        return None
    return _read(path)


def _warehouse_columns(db: Path, table: str, notes: list[str]) -> tuple[str, list[str]] | None:
    """(database.schema.table, columns) from a DuckDB copy, preferring schema `main`."""
    try:
        import duckdb
    except ImportError:
        notes.append("duckdb is not installed; upstream columns come from artifacts only")
        return None
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            rows = con.execute(
                "select table_catalog, table_schema, column_name from information_schema.columns"
                " where lower(table_name) = lower(?)"
                " order by table_schema <> 'main', table_schema, ordinal_position",
                [table],
            ).fetchall()
    except duckdb.Error as exc:
        notes.append(f"warehouse snapshot {db.name} unreadable: {str(exc).splitlines()[0]}")
        return None
    if not rows:
        return None
    catalog, schema = rows[0][0], rows[0][1]
    cols = [r[2] for r in rows if r[0] == catalog and r[1] == schema]
    return f"{catalog}.{schema}.{table}", cols


def _artifact_columns(unique_id: str, artifacts: list[dict[str, Any]]) -> list[str]:
    for art in artifacts:
        node = _node(art, unique_id) or _node(art, unique_id, "sources")
        columns = node.get("columns")
        if isinstance(columns, dict | list) and columns:
            return [c for c in columns if isinstance(c, str)]
    return []


def _upstream(
    refs: list[str],
    sources: list[tuple[str, str]],
    index: ProjectIndex,
    db_snapshot: Path | None,
    artifacts: list[dict[str, Any]],
    notes: list[str],
    server: tuple[dict[str, Any], dict[str, Any] | None] | None = None,
) -> list[Relation]:
    """Each relation the unit reads with its columns: from the DuckDB snapshot, or from the
    information_schema of `server` (a Postgres profile output, and the failing run's manifest
    that places each relation), else from the artifacts."""
    project = index.project_name or "project"
    wanted: list[tuple[str, str | None, str]] = []  # (name, unique_id, table to look up)
    for name in refs:
        kind = "seed" if name in index.seeds else "snapshot" if name in index.snapshots else "model"
        known = name in index.models or name in index.seeds or name in index.snapshots
        wanted.append((name, f"{kind}.{project}.{name}" if known else None, name))
    for src, table in sources:
        wanted.append((f"{src}.{table}", f"source.{project}.{src}.{table}", table))
    on_server: dict[str, tuple[str, list[str]]] = {}
    if server is not None and db_snapshot is None:
        output, manifest = server
        nodes = [(n, _node(manifest, u or "") or _node(manifest, u or "", "sources"), t)
                 for n, u, t in wanted]  # fmt: skip
        on_server = pg_upstream_columns(output, nodes, notes)
    relations: list[Relation] = []
    for name, unique_id, table in wanted:
        found = _warehouse_columns(db_snapshot, table, notes) if db_snapshot else None
        found = found or on_server.get(name)
        if found is not None:
            relations.append(
                Relation(name=name, unique_id=unique_id, relation=found[0], columns=found[1])
            )
            continue
        columns = _artifact_columns(unique_id, artifacts) if unique_id else []
        if not columns:
            notes.append(f"no column information for upstream {name!r}")
        relations.append(Relation(name=name, unique_id=unique_id, columns=columns))
    return relations


_KNOWN_TESTS = ("not_null", "unique", "accepted_values", "relationships")


def _find_model_file(repo_root: Path, project: Path, index: ProjectIndex, name: str) -> str | None:
    for model_dir in index.model_paths:
        for suffix in (".sql", ".py"):
            hits = sorted((project / model_dir).rglob(f"{name}{suffix}"))
            if hits:
                return _rel(hits[0], repo_root)
    return None


def _split_test_name(name: str, index: ProjectIndex) -> tuple[str | None, str | None, str | None]:
    """(kind, model, column) from a generic test name like not_null_orders_order_id."""
    base = name.split("__", 1)[0]  # accepted_values_x_col__a__b: arguments follow "__"
    for model in sorted(index.models + index.seeds + index.snapshots, key=len, reverse=True):
        marker = f"_{model}"
        at = base.find(marker + "_") if marker + "_" in base else -1
        if at <= 0 and base.endswith(marker):
            at = len(base) - len(marker)
        if at > 0:
            column = base[at + len(marker) + 1 :] or None
            return base[:at], model, column
    for kind in _KNOWN_TESTS:
        if base.startswith(kind + "_") or base.startswith(f"source_{kind}_"):
            return kind, None, None
    return None, None, None


def parse_test_node(
    evidence: Evidence, repo_root: Path, project: Path, manifest: dict[str, Any] | None
) -> None:
    """Fill test_kind / tested_model / tested_column / tested_model_path of a test node."""
    unit_id = evidence.event.unit_id
    name = unit_id.split(".")[2] if unit_id.count(".") >= 2 else unit_id
    node = _node(manifest, unit_id)
    kind = model = column = None
    if node:
        meta = as_dict(node.get("test_metadata"))
        kind = as_str(meta.get("name")) or "singular"
        column = as_str(node.get("column_name")) or as_str(
            as_dict(meta.get("kwargs")).get("column_name")
        )
        attached = as_str(node.get("attached_node")) or next(
            (d for d in _depends_on(node) if d.startswith("model.")), None
        )
        model = attached.split(".")[-1] if attached else None
    elif (evidence.unit_path or "").endswith(".sql"):
        kind = "singular"
        refs, _ = code_refs(evidence)
        model = refs[0] if refs else None
    else:
        kind, model, column = _split_test_name(name, evidence.index)
    evidence.test_kind, evidence.tested_model, evidence.tested_column = kind, model, column
    if model:
        evidence.tested_model_path = _find_model_file(repo_root, project, evidence.index, model)


def _depends_on(node: dict[str, Any]) -> list[str]:
    return [d for d in as_list(as_dict(node.get("depends_on")).get("nodes")) if isinstance(d, str)]


def _tests_of(entry: dict[str, Any]) -> list[str]:
    def names(tests: Any, column: str | None) -> list[str]:
        out: list[str] = []
        for test in tests if isinstance(tests, list) else []:
            kind = test if isinstance(test, str) else next(iter(test), "?") if test else "?"
            out.append(f"{kind}({column})" if column else str(kind))
        return out

    found = names(entry.get("data_tests") or entry.get("tests"), None)
    for col in entry.get("columns") or []:
        if isinstance(col, dict):
            col_tests = col.get("data_tests") or col.get("tests")
            found += names(col_tests, str(col.get("name")))
    return found


def find_properties(
    repo_root: Path, project: Path, unit_path: str | None, subject: str
) -> tuple[dict[str, str], list[str]]:
    """YAML files near `unit_path` that describe `subject`, and the tests they attach to it."""
    dirs = [(repo_root / unit_path).parent] if unit_path else []
    dirs.append(project)
    word = re.compile(rf"\bname:\s*['\"]?{re.escape(subject)}['\"]?\s*$", re.MULTILINE)
    props: dict[str, str] = {}
    tests: list[str] = []
    for directory in dirs:
        files = sorted(p for p in directory.glob("*") if p.suffix in (".yml", ".yaml"))
        for path in files:
            text = _read(path)
            if text is None or not word.search(text) or path.name == "dbt_project.yml":
                continue
            props[_rel(path, repo_root)] = text
            data = load_yaml_text(text)
            for section in ("models", "seeds", "snapshots"):
                sections = data.get(section) if isinstance(data, dict) else None
                for entry in sections or []:
                    if isinstance(entry, dict) and entry.get("name") == subject:
                        tests += _tests_of(entry)
        if props:
            break
    return props, tests


def gather_dbt_evidence(
    event: UniversalFailureEvent,
    repo_root: Path,
    *,
    last_good_commit: str | None = None,
    db_snapshot: Path | None = None,
) -> Evidence:
    """Gather, then redact, the evidence for a failed dbt node; BadInputError only for repo_root."""
    if not repo_root.is_dir():
        raise BadInputError(f"{repo_root}: repository root is not a directory; pass the git root")
    notes: list[str] = []
    last_good_commit = on_this_line(repo_root, last_good_commit, event, notes)
    project = locate_project(event, repo_root)
    manifest = _load_json(event.artifacts.get("manifest"))
    catalog = _load_json(event.artifacts.get("catalog"))
    index = index_project(project, as_path(event.artifacts.get("manifest")))
    parts = event.unit_id.split(".")
    unit_name = parts[2] if len(parts) >= 3 else event.unit_id

    raw_code = _read_in_repo(repo_root, event.unit_path) if event.unit_path else None
    if event.unit_path and raw_code is None:
        notes.append(f"unit file {event.unit_path} not readable in {repo_root}")
    evidence = Evidence(
        event=event,
        repo_root=str(repo_root),
        project_dir=_rel(project, repo_root),
        unit_path=event.unit_path,
        unit_name=unit_name,
        raw_code=raw_code if not (event.unit_path or "").endswith((".yml", ".yaml")) else None,
        error=event.error_message or event.log_excerpt or "",
        last_good_commit=last_good_commit,
        index=index,
    )
    evidence.compiled_code = _compiled_code(event, repo_root, project, index, manifest, notes)
    if parts[0] == "test":
        parse_test_node(evidence, repo_root, project, manifest)
        if evidence.tested_model_path:
            tested_code = _read_in_repo(repo_root, evidence.tested_model_path)
            if tested_code is not None:
                evidence.related_code[evidence.tested_model_path] = tested_code
    refs, sources = code_refs(evidence)
    # A test's relations (relationships' `to:` model too) are its manifest dependencies.
    for dep in _depends_on(_node(manifest, event.unit_id)):
        if dep.split(".")[0] in ("model", "seed", "snapshot") and dep.split(".")[-1] not in refs:
            refs.append(dep.split(".")[-1])
    if evidence.tested_model:  # the tested model first: it is what the test reads
        refs = [evidence.tested_model, *(r for r in refs if r != evidence.tested_model)]
    artifacts = [a for a in (catalog, manifest) if a is not None]
    output = postgres_output(event) if db_snapshot is None else None
    server = (output, manifest) if output is not None else None
    evidence.upstream = _upstream(refs, sources, index, db_snapshot, artifacts, notes, server)
    subject = evidence.tested_model or unit_name
    evidence.properties, evidence.tests = find_properties(
        repo_root, project, evidence.tested_model_path or event.unit_path, subject
    )
    if event.unit_path and event.unit_path.endswith((".yml", ".yaml")):
        own = _read_in_repo(repo_root, event.unit_path)  # the file that declares the test
        if own is not None:
            evidence.properties.setdefault(event.unit_path, own)
            if mark := yaml_error_mark(own):
                evidence.yaml_error_at = mark.describe(event.unit_path)
    history_paths = [p for p in (event.unit_path, evidence.tested_model_path) if p]
    evidence.git_log, evidence.changed_files = history_and_changes(
        repo_root, history_paths, last_good_commit, event.commit or "HEAD", notes
    )
    evidence.breaking_diff = breaking_diff_or_note(
        repo_root, last_good_commit, event.commit or "HEAD", history_paths, notes
    )
    evidence.change_base = change_base(repo_root, last_good_commit, event.commit or "HEAD")
    if event.status == "error":
        evidence.type_changes = data_file_type_changes(
            evidence, repo_root, evidence.change_base, event.commit or "HEAD", notes
        )
        evidence.conversion = find_conversion(evidence, repo_root, db_snapshot)
    compiled = evidence.compiled_code
    if event.status == "fail" and compiled and db_snapshot is not None:
        evidence.failing_rows, note = sample_failing_rows(
            compiled, db_snapshot, column=evidence.tested_column
        )
        if note:
            notes.append(note)
    elif event.status == "fail" and compiled and output is not None:
        evidence.failing_rows, note = sample_failing_rows_pg(
            compiled, output, column=evidence.tested_column
        )
        if note:
            notes.append(note)
    elif event.status == "fail" and compiled and (sf := snowflake_output(event)) is not None:
        evidence.failing_rows, note = sample_failing_rows_sf(
            compiled, sf, column=evidence.tested_column
        )
        if note:
            notes.append(note)
    if manifest is None:
        notes.append("no manifest from this run; index built from files")
    evidence.notes = list(dict.fromkeys(notes))
    profiles_dir = event.dbt.profiles_dir if event.dbt else None
    secrets = dbt_profile_secrets(profiles_dir, project) + environment_secrets()
    return redact_model(evidence, secrets)

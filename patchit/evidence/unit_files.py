"""The files a failing unit depends on, and the part of the breaking change that touches them.

dbt: the node's file, its upstream models, seeds, macros and YAML (walked from the run's
manifest, else from its refs); Airflow and Python: the DAG file, the repo modules it imports
and the files the traceback names. A partial revert searches only these files, and a report
shows only their hunks of the change (plus changed data files, which a unit reads).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from patchit.evidence.gitlog import split_diff
from patchit.evidence.model import Evidence
from patchit.evidence.packages import package_path

DATA_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".parquet", ".avro", ".orc",
                 ".xlsx", ".xls")  # fmt: skip


def is_data_file(path: str) -> bool:
    return path.lower().endswith(DATA_SUFFIXES)


def dependency_files(
    evidence: Evidence, changed: list[str], *, every_macro: bool = True
) -> list[str]:
    """The changed files the failing unit depends on, its own file first. `every_macro`:
    with the project's changed macro files the manifest does not link to the unit (see
    `_dbt_dependencies`); without, only what the manifest says it reads."""
    wanted: list[str] = []
    event = evidence.event
    for path in (evidence.unit_path, evidence.tested_model_path, *evidence.properties):
        if path:
            wanted.append(path)
    if event.dbt is not None:
        wanted += _dbt_dependencies(evidence, changed, every_macro)
    else:
        wanted += list(evidence.related_code) + [f.path for f in evidence.frames]
    return [p for p in dict.fromkeys(wanted) if p in changed]


def unit_change(evidence: Evidence) -> tuple[list[str], str]:
    """(files, diff): the changed files the unit depends on, then the changed data files,
    and the hunks of the breaking change (`evidence.breaking_diff`) in them."""
    changed = evidence.changed_files
    files = dependency_files(evidence, changed)
    files += [p for p in changed if is_data_file(p) and p not in files]
    parts = split_diff(evidence.breaking_diff)
    return files, "".join(parts[p] for p in files if p in parts)


def _dbt_dependencies(evidence: Evidence, changed: list[str], every_macro: bool) -> list[str]:
    prefix = evidence.project_dir or ""
    prefix = "" if prefix == "." else prefix

    manifest = _manifest(evidence)
    project_dir = Path(evidence.repo_root) / prefix
    project = (manifest.get("metadata") or {}).get("project_name") or evidence.index.project_name

    def in_repo(path: str, uid: str = "") -> str:
        path = package_path(project_dir, project, uid, path) if uid else path
        return f"{prefix.rstrip('/')}/{path}" if prefix else path

    unit = evidence.event.unit_id
    nodes = manifest.get("nodes") or {}
    if unit in nodes:
        found: list[str] = []
        macros = manifest.get("macros") or {}
        todo, seen = [unit], set()
        while todo:
            uid = todo.pop(0)
            if uid in seen:
                continue
            seen.add(uid)
            node = nodes.get(uid) or macros.get(uid) or {}
            if isinstance(node.get("original_file_path"), str):
                found.append(in_repo(node["original_file_path"], uid))
            patch = node.get("patch_path")
            if isinstance(patch, str) and "://" in patch:
                found.append(in_repo(patch.split("://", 1)[1]))
            depends = node.get("depends_on") or {}
            todo += [d for d in depends.get("nodes") or [] if d in nodes]
            todo += [m for m in depends.get("macros") or [] if m in macros]
        # macros are global: one renamed or removed is no longer in the manifest's
        # depends_on of the node that still calls it, yet it is what broke that node
        return found + [p for p in changed if every_macro and _is_macro_file(p, prefix)]
    # no manifest for this unit (a parse or compile error): the refs of its code, the
    # project's macros and YAML; when the unit is no single model, the whole project
    refs = {r.name for r in evidence.upstream} | set(_REF.findall(evidence.raw_code or ""))
    refs |= _upstream_refs(project_dir, evidence.index.model_paths, refs)
    in_project = [p for p in changed if not prefix or p.startswith(prefix.rstrip("/") + "/")]
    if not evidence.unit_path or evidence.unit_path.endswith((".yml", ".yaml")):
        return [p for p in in_project if p.endswith((".sql", ".yml", ".yaml", ".py"))]
    return [
        p
        for p in in_project
        if Path(p).stem in refs or p.endswith((".yml", ".yaml")) or _is_macro_file(p, prefix)
    ]


_REF = re.compile(r"""ref\(\s*['"]([\w.-]+)['"]""")
_MAX_UPSTREAM_FILES = 5_000


def _upstream_refs(project_dir: Path, model_paths: list[str], refs: set[str]) -> set[str]:
    """The models upstream of `refs`, walked through the refs in the project's model files:
    a column removed two models up is what breaks the unit as much as its direct parent."""
    files: dict[str, Path] = {}
    for top in model_paths or ["models"]:
        base = project_dir / top.strip("/")
        if not base.is_dir():
            continue
        for path in base.rglob("*.sql"):
            files.setdefault(path.stem, path)
            if len(files) > _MAX_UPSTREAM_FILES:
                return set()  # too big to walk by hand: the direct refs only
    found: set[str] = set()
    todo = [r for r in refs if r in files]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            text = files[name].read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        todo += [r for r in _REF.findall(text) if r in files and r not in found]
    return found


def _is_macro_file(path: str, prefix: str) -> bool:
    inside = not prefix or path.startswith(prefix.rstrip("/") + "/")
    return inside and "/macros/" in f"/{path}" and path.endswith(".sql")


def _manifest(evidence: Evidence) -> dict[str, Any]:
    path = evidence.event.artifacts.get("manifest")
    return read_manifest(Path(path)) if path else {}


def read_manifest(path: Path) -> dict[str, Any]:
    """A run's manifest.json as parsed once per process (by path, mtime and size); {} when it
    cannot be read. The nodes of one run, the evidence, the screen and the harness's
    selection share it: a 2,000-model project's manifest takes a quarter of a second to
    parse. Callers only read it."""
    try:
        stat = path.stat()
    except OSError:
        return {}
    return _read_manifest(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _read_manifest(path: str, _mtime_ns: int, _size: int) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

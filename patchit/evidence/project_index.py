"""Index of the names a dbt project defines, built by scanning files.

It must work when dbt failed at parse time and no manifest of this commit exists, so it reads
dbt_project.yml, the model/seed/snapshot/macro folders and installed packages directly; a
manifest, when given, only adds names.
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.errors import BadInputError
from patchit.evidence.model import ProjectIndex
from patchit.text.inputs import (
    as_dict,
    as_str,
    is_regular_file,
    parsed_once,
    read_input_json_or_none,
    read_input_text,
    read_input_text_or_none,
)

# Names dbt puts in every Jinja context; a call to one of them is never an "undefined macro".
DBT_CONTEXT_NAMES: tuple[str, ...] = (
    "adapter", "api", "builtins", "config", "database", "dbt_version", "debug", "diff_of_two_dicts",
    "doc", "env_var", "exceptions", "execute", "flags", "fromjson", "fromyaml", "graph",
    "invocation_id", "invocation_args_dict", "is_incremental", "load_relation", "load_result",
    "local_md5", "log", "model", "modules", "node", "print", "project_name", "query_header", "ref",
    "return", "run_query", "run_started_at", "schema", "schemas", "selected_resources", "source",
    "statement", "store_result", "store_raw_result", "target", "this", "thread_id", "tojson",
    "toyaml", "try_or_compiler_error", "var", "write", "zip", "set", "set_strict", "zip_strict",
    "dispatch", "context", "database_schemas", "sql", "sql_header", "pre_hooks", "post_hooks",
    "column", "model_name", "test", "materialization", "submission_method", "exists",
)  # fmt: skip

_MACRO_DEF = re.compile(r"{%-?\s*(?:macro|test|materialization)\s+([A-Za-z_][A-Za-z0-9_]*)")
_SNAPSHOT_DEF = re.compile(r"{%-?\s*snapshot\s+([A-Za-z_][A-Za-z0-9_]*)")
_YAML_SUFFIXES = (".yml", ".yaml")


def load_yaml_text(text: str) -> Any:
    """Parsed YAML, or None when it does not parse (a broken file is evidence, not a crash)."""
    try:
        return YAML(typ="safe", pure=True).load(text)
    except (YAMLError, RecursionError, ValueError, TypeError):
        return None


def _load_yaml(path: Path) -> Any:
    return parsed_once(path, lambda _path, text: load_yaml_text(text), "project_index.yaml",
                       _parse_yaml)  # fmt: skip


def _parse_yaml(path: Path) -> Any:
    text = read_input_text_or_none(path)
    return None if text is None else load_yaml_text(text)


def read_project_config(project_dir: Path) -> dict[str, Any]:
    """dbt_project.yml as a dict ({} when missing or unparseable)."""
    data = _load_yaml(project_dir / "dbt_project.yml")
    return data if isinstance(data, dict) else {}


def config_paths(config: dict[str, Any], key: str, default: list[str]) -> list[str]:
    """A dbt_project.yml paths setting (`model-paths`...) as a list, or `default`."""
    value = config.get(key, default)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return default


def _files(root: Path, dirs: list[str], suffixes: tuple[str, ...]) -> list[Path]:
    found: list[Path] = []
    for d in dirs:
        base = root / d
        if base.is_dir():
            found.extend(p for p in sorted(base.rglob("*")) if p.suffix in suffixes and p.is_file())
    return found


def _macro_names(files: list[Path], prefix: str = "") -> list[str]:
    names: list[str] = []
    for path in files:
        try:
            text = read_input_text(path)
        except BadInputError:
            continue
        names.extend(prefix + m for m in _MACRO_DEF.findall(text))
    return names


@lru_cache(maxsize=1)
def builtin_macros() -> tuple[str, ...]:
    """Macros shipped with the installed dbt and its adapters (global_project, duckdb, ...)."""
    spec = importlib.util.find_spec("dbt.include") if importlib.util.find_spec("dbt") else None
    if spec is None or not spec.submodule_search_locations:
        return ()
    names: set[str] = set()
    for location in spec.submodule_search_locations:
        for include in Path(location).iterdir():
            macros = include / "macros"
            if include.is_dir() and macros.is_dir():
                names.update(_macro_names(_files(include, ["macros"], (".sql",))))
    return tuple(sorted(names))


def _sources_and_snapshots(yaml_files: list[Path]) -> tuple[list[tuple[str, str]], list[str]]:
    sources: list[tuple[str, str]] = []
    snapshots: list[str] = []
    for path in yaml_files:
        data = _load_yaml(path)
        if not isinstance(data, dict):
            continue
        for src in data.get("sources") or []:
            if isinstance(src, dict) and isinstance(src.get("name"), str):
                for table in src.get("tables") or []:
                    if isinstance(table, dict) and isinstance(table.get("name"), str):
                        sources.append((src["name"], table["name"]))
        for snap in data.get("snapshots") or []:
            # YAML-defined snapshots (dbt >= 1.9) carry a `relation`; property-only entries do not.
            if isinstance(snap, dict) and isinstance(snap.get("name"), str) and "relation" in snap:
                snapshots.append(snap["name"])
    return sources, snapshots


def _installed_packages(packages_dir: Path) -> dict[str, Path]:
    """Installed package name (from its dbt_project.yml, else folder name) -> its folder."""
    found: dict[str, Path] = {}
    if packages_dir.is_dir():
        for pkg in sorted(packages_dir.iterdir()):
            if pkg.is_dir():
                name = read_project_config(pkg).get("name")
                found[name if isinstance(name, str) else pkg.name] = pkg
    return found


def _add_manifest(index: ProjectIndex, manifest_path: Path) -> None:
    manifest = as_dict(read_input_json_or_none(manifest_path))
    for node in as_dict(manifest.get("nodes")).values():
        kind, name = as_dict(node).get("resource_type"), as_str(as_dict(node).get("name"))
        if name is None:
            continue
        if kind == "model" and name not in index.models:
            index.models.append(name)
        elif kind == "seed" and name not in index.seeds:
            index.seeds.append(name)
        elif kind == "snapshot" and name not in index.snapshots:
            index.snapshots.append(name)
    for src in as_dict(manifest.get("sources")).values():
        source, table = as_str(as_dict(src).get("source_name")), as_str(as_dict(src).get("name"))
        if source is not None and table is not None and (source, table) not in index.sources:
            index.sources.append((source, table))
    known = set(index.macros)
    builtins = set(builtin_macros())
    for macro in as_dict(manifest.get("macros")).values():
        pkg, name = as_dict(macro).get("package_name"), as_dict(macro).get("name")
        if not isinstance(pkg, str) or not isinstance(name, str):
            continue
        if pkg == index.project_name:
            label = name
        elif pkg == "dbt" or name in builtins:
            continue  # dbt's and the adapter's own macros are already listed
        else:
            label = f"{pkg}.{name}"
        if label not in known:
            known.add(label)
            index.macros.append(label)


def _packages(project_dir: Path, config: dict[str, Any]) -> dict[str, Path]:
    return _installed_packages(
        project_dir / str(config.get("packages-install-path", "dbt_packages"))
    )


def node_names(project_dir: Path) -> list[str]:
    """The models, seeds and snapshots of `project_dir` and its installed packages, by
    scanning files (no macros: cheaper than `index_project`, and dbt is never imported)."""
    index = _scan_nodes(project_dir, read_project_config(project_dir))
    return sorted({*index.models, *index.seeds, *index.snapshots})


def _scan_nodes(project_dir: Path, config: dict[str, Any]) -> ProjectIndex:
    model_paths = config_paths(config, "model-paths", ["models"])
    seed_paths = config_paths(config, "seed-paths", ["seeds"])
    snapshot_paths = config_paths(config, "snapshot-paths", ["snapshots"])
    packages = _packages(project_dir, config)
    models = [p.stem for p in _files(project_dir, model_paths, (".sql", ".py"))]
    for pkg_dir in packages.values():
        pkg_config = read_project_config(pkg_dir)
        models += [
            p.stem
            for p in _files(pkg_dir, config_paths(pkg_config, "model-paths", ["models"]), (".sql",))
        ]
    seeds = [p.stem for p in _files(project_dir, seed_paths, (".csv",))]
    snapshot_sql = _files(project_dir, snapshot_paths, (".sql",))
    snapshots: list[str] = []
    for path in snapshot_sql:
        snapshots.extend(_SNAPSHOT_DEF.findall(read_input_text_or_none(path, strict=False) or ""))
    yaml_files = _files(project_dir, model_paths + snapshot_paths + seed_paths, _YAML_SUFFIXES)
    sources, yaml_snapshots = _sources_and_snapshots(yaml_files)
    return ProjectIndex(
        models=sorted(set(models)),
        seeds=sorted(set(seeds)),
        snapshots=sorted(set(snapshots + yaml_snapshots)),
        sources=sorted(set(sources)),
        model_paths=model_paths,
        packages=sorted(packages),
    )


def index_project(project_dir: Path, manifest_path: Path | None = None) -> ProjectIndex:
    """Scan `project_dir` for models, seeds, snapshots, sources and macros (never raises)."""
    config = read_project_config(project_dir)
    index = _scan_nodes(project_dir, config)
    packages = _packages(project_dir, config)
    macro_paths = config_paths(config, "macro-paths", ["macros"])
    macros = _macro_names(_files(project_dir, macro_paths, (".sql",)))
    for pkg_name, pkg_dir in packages.items():
        macro_dirs = config_paths(read_project_config(pkg_dir), "macro-paths", ["macros"])
        macros += _macro_names(_files(pkg_dir, macro_dirs, (".sql",)), prefix=f"{pkg_name}.")
    macros += list(DBT_CONTEXT_NAMES) + list(builtin_macros())

    name = config.get("name")
    index.project_name = name if isinstance(name, str) else None
    index.macros = list(dict.fromkeys(macros))
    if manifest_path is not None and is_regular_file(manifest_path):
        _add_manifest(index, manifest_path)
    return index

"""What a candidate modified, when the dbt harness can tell without dbt's `state:modified`.

The sandbox run selects `state:modified+` (with the failing run's manifest as `--state`) so that
a node the candidate changed is re-run with its descendants even when it is not downstream of
the failed unit. dbt finds those nodes by comparing the whole project with the saved manifest,
about 0.65 s on 200 models, plus reading the manifest for `--state`. But the worktree is the
failing commit plus the candidate's edits, so the modified nodes are the ones defined in the
files the candidate changed. When every changed file is a model the failing run's manifest
names (a model's SQL or Python file), selecting those models by name (`name+`) selects the
same nodes, and `state:modified+` is left out. Anything else changed (a macro, a YAML file,
`dbt_project.yml`, a seed, a file the manifest does not know) keeps `state:modified+`.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from patchit.errors import VcsError
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git

MODEL_SUFFIXES = (".sql", ".py")


def changed_files(root: Path) -> list[str] | None:
    """Repo-relative paths edited or added in the worktree `root`; None when git cannot say
    or a file was deleted (a deleted model is no node to select by name)."""
    try:
        out = run_git(root, "status", "--porcelain", "--untracked-files=all", "--no-renames",
                      timeout_s=QUERY_TIMEOUT_S)  # fmt: skip
    except VcsError:
        return None
    paths = []
    for line in out.splitlines():
        if len(line) <= 3 or "D" in line[:2]:
            return None
        paths.append(line[3:].strip().strip('"'))
    return paths


def models_by_file(data: dict[str, Any]) -> dict[str, str] | None:
    """The root project's models in a manifest: original file path (project-relative) ->
    node name; None when the manifest does not name its project."""
    package = (data.get("metadata") or {}).get("project_name")
    if not isinstance(package, str):
        return None
    found: dict[str, str] = {}
    for node in (data.get("nodes") or {}).values():
        if not isinstance(node, dict) or node.get("resource_type") != "model":
            continue
        if node.get("package_name") != package:
            continue  # an installed package's model: its paths are its own project's
        path, name = node.get("original_file_path"), node.get("name")
        if isinstance(path, str) and isinstance(name, str):
            found[path] = name
    return found


def modified_models(root: Path, project_dir: Path, manifest: Path) -> list[str] | None:
    """The names of the models the candidate changed in `root`, when those are all it
    changed (see the module's docstring); None when `state:modified+` must decide."""
    changed = changed_files(root)
    if not changed:
        return None  # nothing changed, or git could not say: let dbt compare
    try:
        project = PurePosixPath(project_dir.relative_to(root).as_posix())
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    models = models_by_file(data) if isinstance(data, dict) else None
    if models is None:
        return None
    names: list[str] = []
    prefix = project.parts if project.as_posix() != "." else ()
    for path in changed:
        rel = PurePosixPath(path)
        if rel.parts[: len(prefix)] != prefix:
            return None
        inner = PurePosixPath(*rel.parts[len(prefix) :]).as_posix()
        if not inner.endswith(MODEL_SUFFIXES) or inner not in models:
            return None
        if models[inner] not in names:
            names.append(models[inner])
    return names

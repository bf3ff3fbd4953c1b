"""Where a package's node lives in the repo.

dbt gives a package node's `original_file_path` relative to the package
(`models/stg_stripe__charge.sql` for `model.stripe_source.stg_stripe__charge`), so a failing
package model, or one a failing model reads, is found under the folder `dbt deps` installed
the package in (`dbt_packages/stripe_source/...`, or `packages-install-path`), never taken
for a project file of the same relative path.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml


def _project_yml(folder: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load((folder / "dbt_project.yml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


@lru_cache(maxsize=64)
def _package_folders(project_dir: Path, package: str) -> list[Path]:
    """The folders a package may be installed in, the one named after it first."""
    installed = str(_project_yml(project_dir).get("packages-install-path") or "dbt_packages")
    root = project_dir / installed.strip("/")
    folders = [root / package]
    if root.is_dir():  # a git package's folder may be named other than its project
        folders += [p.parent for p in sorted(root.glob("*/dbt_project.yml"))
                    if _project_yml(p.parent).get("name") == package]  # fmt: skip
    return folders


def package_path(project_dir: Path, project: str | None, unique_id: str, path: str) -> str:
    """A node's file relative to the project: a package's node (`model.stripe_source.x`,
    its `original_file_path` relative to the package) under the folder `dbt deps` installed
    the package in (`dbt_packages/stripe_source/models/x.sql`); the project's own as given."""
    parts = unique_id.split(".")
    package = parts[1] if len(parts) >= 3 else None
    if not package or package == project:
        return path
    folders = _package_folders(project_dir, package)
    for folder in folders:
        if (folder / path).is_file():
            return (folder / path).relative_to(project_dir).as_posix()
    return path

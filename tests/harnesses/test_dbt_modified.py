"""The candidate's changed models by name instead of dbt's `state:modified+` (git, no dbt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.harnesses.dbt_modified import modified_models
from patchit.harnesses.dbt_units import select_units
from tests.conftest import commit_all, git

MODELS = {
    "models/marts/orders.sql": "orders",
    "models/staging/stg_orders.sql": "stg_orders",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repo holding a dbt project under `project/`, and the failing run's manifest."""
    root = tmp_path / "repo"
    project = root / "project"
    for path in [*MODELS, "models/schema.yml", "macros/cents.sql"]:
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text("select 1\n")
    (project / "dbt_project.yml").write_text("name: shop\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "shop")
    nodes = {
        f"model.shop.{name}": {"resource_type": "model", "package_name": "shop",
                               "original_file_path": path, "name": name}
        for path, name in MODELS.items()
    }  # fmt: skip
    nodes["model.dep.orders"] = {"resource_type": "model", "package_name": "dep",
                                 "original_file_path": "models/dep.sql", "name": "dep"}  # fmt: skip
    manifest = {"metadata": {"project_name": "shop"}, "nodes": nodes}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return root


def _modified(repo: Path) -> list[str] | None:
    return modified_models(repo, repo / "project", repo.parent / "manifest.json")


def test_changed_models_are_named(repo: Path) -> None:
    (repo / "project/models/marts/orders.sql").write_text("select 2\n")
    (repo / "project/models/staging/stg_orders.sql").write_text("select 3\n")
    assert sorted(_modified(repo) or []) == ["orders", "stg_orders"]


@pytest.mark.parametrize(
    "change",
    ["models/schema.yml", "macros/cents.sql", "dbt_project.yml", "models/new_model.sql",
     "../README.md", "models/dep.sql"],
)  # fmt: skip
def test_anything_but_known_models_leaves_it_to_dbt(repo: Path, change: str) -> None:
    (repo / "project/models/marts/orders.sql").write_text("select 2\n")
    (repo / "project" / change).write_text("changed\n")
    assert _modified(repo) is None


def test_a_deleted_model_or_no_change_leaves_it_to_dbt(repo: Path) -> None:
    assert _modified(repo) is None
    (repo / "project/models/marts/orders.sql").unlink()
    assert _modified(repo) is None


def test_a_manifest_without_its_project_name_leaves_it_to_dbt(repo: Path) -> None:
    (repo / "project/models/marts/orders.sql").write_text("select 2\n")
    (repo.parent / "manifest.json").write_text(json.dumps({"nodes": {}}))
    assert _modified(repo) is None


def test_named_models_replace_the_state_selector() -> None:
    event = UniversalFailureEvent(
        source="dbt", pipeline_id="shop", unit_id="model.shop.daily_revenue",
        dbt=DbtInvocation(command="build", args=["build"], project_dir="/p", cwd="/p"),
    )  # fmt: skip
    assert select_units(event, True, (), ["daily_revenue", "orders"]) == [
        "daily_revenue+", "orders+"
    ]  # fmt: skip
    assert select_units(event, True, (), None) == ["daily_revenue+", "state:modified+"]
    assert select_units(event, False, (), ["orders"]) == ["daily_revenue+"]

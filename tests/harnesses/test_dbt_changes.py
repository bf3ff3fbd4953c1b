"""What a candidate changed, judged from the failing run's parse instead of `state:modified+`
(fast: a parse file written here in dbt's shape; the real-dbt check is in test_dbt.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import msgpack
import pytest

from patchit.harnesses.dbt_changes import (
    agrees_with_manifest,
    changed_node_names,
    file_checksum,
    manifest_node_names,
    read_failing_parse,
)

PROJECT = {
    "dbt_project.yml": "name: shop\nprofile: shop\nconfig-version: 2\n",
    "models/staging/stg_orders.sql": "select 1 as id\n",
    "models/orders.sql": "select * from {{ ref('stg_orders') }}\n",
    "models/schema.yml": "version: 2\nmodels:\n  - name: orders\n",
    "models/overview.md": "{% docs overview %}shop{% enddocs %}\n",
    "macros/cents.sql": "{% macro cents(x) %}{{ x }} * 100{% endmacro %}\n",
    "seeds/raw_orders.csv": "id,amount\n1,2\n",
    "seeds/big_events.csv": "id\n1\n",
    "snapshots/orders_snapshot.sql": "{% snapshot orders_history %}select 1{% endsnapshot %}\n",
    "tests/assert_positive.sql": "select 1 where false\n",
    "dbt_packages/util/dbt_project.yml": "name: util\nconfig-version: 2\n",
    "dbt_packages/util/models/util_dates.sql": "select 1 as d\n",
}
NODES = {
    "models/staging/stg_orders.sql": ("model", ["model.shop.stg_orders"]),
    "models/orders.sql": ("model", ["model.shop.orders"]),
    "models/schema.yml": ("schema", []),
    "models/overview.md": ("docs", []),
    "macros/cents.sql": ("macro", []),
    "seeds/raw_orders.csv": ("seed", ["seed.shop.raw_orders"]),
    "seeds/big_events.csv": ("seed", ["seed.shop.big_events"]),
    "snapshots/orders_snapshot.sql": ("snapshot", ["snapshot.shop.orders_history"]),
    "tests/assert_positive.sql": ("singular_test", ["test.shop.assert_positive"]),
    "dbt_packages/util/models/util_dates.sql": ("model", ["model.util.util_dates"]),
}


def _write(root: Path) -> None:
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _parse_file(user: Path, dest: Path) -> Path:
    """A partial-parse file in dbt's layout for the project at `user`."""
    files: dict[str, object] = {}
    for rel, (kind, nodes) in NODES.items():
        package = rel.startswith("dbt_packages/")
        root = user / "dbt_packages" / "util" if package else user
        inner = rel.removeprefix("dbt_packages/util/")
        searched, _, relative = inner.partition("/")
        checksum = {"name": "sha256", "checksum": file_checksum(user / rel)}
        if rel == "seeds/big_events.csv":  # dbt hashes a big seed's path, not its contents
            checksum = {"name": "path", "checksum": str(user / rel)}
        files[f"{'util' if package else 'shop'}://{inner}"] = {
            "path": {"searched_path": searched, "relative_path": relative,
                     "modification_time": 1.0, "project_root": str(root)},
            "checksum": checksum, "project_name": "util" if package else "shop",
            "parse_file_type": kind, "nodes": nodes,
        }  # fmt: skip
    files["dbt://macros/adapters.sql"] = {
        "path": {"searched_path": "macros", "relative_path": "adapters.sql",
                 "modification_time": 1.0, "project_root": "/site-packages/dbt/include"},
        "checksum": {"name": "sha256", "checksum": "0" * 64}, "project_name": "dbt",
        "parse_file_type": "macro", "nodes": [],
    }  # fmt: skip

    def project_hash(path: Path) -> dict[str, str]:
        return {"name": "sha256", "checksum": hashlib.sha256(path.read_bytes()).hexdigest()}

    data = {
        "metadata": {"project_name": "shop"},
        "files": files,
        "state_check": {"project_hashes": {
            "shop": project_hash(user / "dbt_project.yml"),
            "util": project_hash(user / "dbt_packages/util/dbt_project.yml"),
            "dbt": {"name": "sha256", "checksum": "1" * 64},
        }},
    }  # fmt: skip
    dest.write_bytes(msgpack.packb(data))
    return dest


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    user, tree = tmp_path / "user", tmp_path / "tree"
    _write(user)
    parse = _parse_file(user, tmp_path / "partial_parse.msgpack")
    shutil.copytree(user, tree)
    return user, tree, parse


def _changed(dirs: tuple[Path, Path, Path]) -> tuple[str, ...] | None:
    _, tree, parse_file = dirs
    parse = read_failing_parse(parse_file)
    assert parse is not None
    return changed_node_names(parse, tree)


def test_an_unchanged_tree_changes_nothing(dirs: tuple[Path, Path, Path]) -> None:
    assert _changed(dirs) == ()


def test_a_changed_model_is_named(dirs: tuple[Path, Path, Path]) -> None:
    tree = dirs[1]
    (tree / "models/staging/stg_orders.sql").write_text("select 2 as id\n")
    (tree / "seeds/raw_orders.csv").write_text("id,amount\n1,3\n")
    assert _changed(dirs) == ("raw_orders", "stg_orders")


def test_whitespace_dbt_strips_is_no_change(dirs: tuple[Path, Path, Path]) -> None:
    tree = dirs[1]
    (tree / "models/orders.sql").write_text("\n" + PROJECT["models/orders.sql"] + "\n\n")
    assert _changed(dirs) == ()


def test_nodes_are_named_as_the_parse_names_them(dirs: tuple[Path, Path, Path]) -> None:
    tree = dirs[1]
    (tree / "snapshots/orders_snapshot.sql").write_text("{% snapshot orders_history %}2")
    (tree / "tests/assert_positive.sql").write_text("select 2 where false\n")
    (tree / "dbt_packages/util/models/util_dates.sql").write_text("select 2 as d\n")
    assert _changed(dirs) == ("assert_positive", "orders_history", "util_dates")


def test_new_models_seeds_and_tests_are_named_by_file(dirs: tuple[Path, Path, Path]) -> None:
    tree = dirs[1]
    (tree / "models/marts").mkdir()
    (tree / "models/marts/revenue.sql").write_text("select 1\n")
    (tree / "seeds/regions.csv").write_text("id\n1\n")
    (tree / "tests/assert_revenue.sql").write_text("select 1 where false\n")
    assert _changed(dirs) == ("assert_revenue", "regions", "revenue")


@pytest.mark.parametrize(
    "change",
    [
        "models/schema.yml",  # properties: tests, contracts, configs
        "macros/cents.sql",  # every model calling it
        "models/overview.md",  # descriptions
        "dbt_project.yml",  # configs, paths, vars
        "dbt_packages/util/dbt_project.yml",
    ],
)
def test_what_only_dbt_can_judge_falls_back_to_its_state_comparison(
    dirs: tuple[Path, Path, Path], change: str
) -> None:
    path = dirs[1] / change
    path.write_text(path.read_text() + "\n-- changed\n")
    assert _changed(dirs) is None


@pytest.mark.parametrize(
    "new", ["models/more.yml", "macros/new_macro.sql", "snapshots/new.sql", "models/notes.md"]
)
def test_new_files_only_dbt_can_judge_fall_back(dirs: tuple[Path, Path, Path], new: str) -> None:
    (dirs[1] / new).write_text("x\n")
    assert _changed(dirs) is None


def test_a_deleted_model_falls_back(dirs: tuple[Path, Path, Path]) -> None:
    (dirs[1] / "models/orders.sql").unlink()
    assert _changed(dirs) is None


def test_a_big_seed_is_compared_by_path_as_dbt_does(dirs: tuple[Path, Path, Path]) -> None:
    tree = dirs[1]
    (tree / "seeds/big_events.csv").write_text("id\n1\n2\n")
    assert _changed(dirs) == ()
    (tree / "seeds/big_events.csv").unlink()
    assert _changed(dirs) is None


def test_files_outside_the_projects_paths_are_not_changes(dirs: tuple[Path, Path, Path]) -> None:
    tree = dirs[1]
    (tree / "README.md").write_text("# shop\n")
    (tree / "scripts").mkdir()
    (tree / "scripts/load.sql").write_text("select 1\n")
    (tree / "shop.duckdb").write_bytes(b"\0")  # the sandbox's database copy
    assert _changed(dirs) == ()


def test_no_parse_or_an_unreadable_one_is_not_used(tmp_path: Path) -> None:
    assert read_failing_parse(tmp_path / "missing.msgpack") is None
    (tmp_path / "garbage.msgpack").write_bytes(b"\xc1 not msgpack")
    assert read_failing_parse(tmp_path / "garbage.msgpack") is None
    (tmp_path / "other.msgpack").write_bytes(msgpack.packb({"files": {}, "metadata": {}}))
    assert read_failing_parse(tmp_path / "other.msgpack") is None


def _manifest(user: Path, dest: Path, **checksums: str) -> Path:
    """A manifest.json with the root project's nodes (and a package's, never compared)."""
    nodes = {}
    for rel, (_, ids) in NODES.items():
        if rel.startswith("dbt_packages/") or not ids or rel == "seeds/big_events.csv":
            continue
        digest = checksums.get(Path(rel).stem) or file_checksum(user / rel)
        kind, _, name = ids[0].split(".")
        nodes[ids[0]] = {"package_name": "shop", "original_file_path": rel, "name": name,
                         "resource_type": kind,
                         "checksum": {"name": "sha256", "checksum": digest}}  # fmt: skip
    nodes["model.util.util_dates"] = {
        "package_name": "util",
        "original_file_path": "x.sql",
        "name": "util_dates",
        "resource_type": "model",
        "checksum": {"name": "sha256", "checksum": "2" * 64},
    }
    dest.write_text(json.dumps({"metadata": {"project_name": "shop"}, "nodes": nodes}))
    return dest


def test_the_parse_is_used_only_when_it_agrees_with_the_failing_runs_manifest(
    dirs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    user, _, parse_file = dirs
    parse = read_failing_parse(parse_file)
    assert parse is not None
    same = _manifest(user, tmp_path / "same.json")
    assert agrees_with_manifest(parse, same)
    # the relations the run knows, packages' too (tests are no relations)
    assert manifest_node_names(same) == {
        "stg_orders", "orders", "raw_orders", "orders_history", "util_dates"
    }  # fmt: skip
    # a parse a later run rewrote after the user edited a model: not the failing run's files
    later = _manifest(user, tmp_path / "later.json", stg_orders="3" * 64)
    assert not agrees_with_manifest(parse, later)
    assert not agrees_with_manifest(parse, tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{")
    assert not agrees_with_manifest(parse, tmp_path / "broken.json")

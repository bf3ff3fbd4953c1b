"""What a candidate changed, judged from the failing run's parse instead of `state:modified+`
(fast: a parse file written here in dbt's shape; the real-dbt check is in test_dbt.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import msgpack
import pytest

from patchit.harnesses.dbt.changes import (
    agrees_with_manifest,
    candidate_changes,
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


def _nodes() -> dict[str, dict[str, object]]:
    """The nodes as dbt serialises them (the fields compared across runs left unset)."""
    return {
        uid: {"name": uid.split(".")[2], "package_name": uid.split(".")[1],
              "resource_type": uid.split(".")[0]}
        for _, ids in NODES.values() for uid in ids
    }  # fmt: skip


def _parse_file(user: Path, dest: Path, root_text: str | None = None) -> Path:
    """A partial-parse file in dbt's layout for the project at `user`, recorded at
    `root_text` (as dbt does with `--project-dir .`) or at its absolute path."""
    files: dict[str, object] = {}
    for rel, (kind, nodes) in NODES.items():
        package = rel.startswith("dbt_packages/")
        top = root_text or str(user)
        root = f"{top}/dbt_packages/util" if package else top
        if root_text == ".":
            root = "dbt_packages/util" if package else "."
        inner = rel.removeprefix("dbt_packages/util/")
        searched, _, relative = inner.partition("/")
        checksum = {"name": "sha256", "checksum": file_checksum(user / rel)}
        if rel == "seeds/big_events.csv":  # dbt names a big seed by its path, not contents
            checksum = {"name": "path", "checksum": rel}
        files[f"{'util' if package else 'shop'}://{inner}"] = {
            "path": {"searched_path": searched, "relative_path": relative,
                     "modification_time": 1.0, "project_root": root},
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
        "metadata": {"project_name": "shop", "invocation_id": "run-1"},
        "nodes": _nodes(),
        "macros": {"macro.shop.cents": {"package_name": "shop", "macro_sql": "{{ x }} * 100"}},
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


def test_the_root_project_s_changed_files_are_named_for_the_worker(
    dirs: tuple[Path, Path, Path],
) -> None:
    """The files that differ, for the worker to take the rest from the parse (`tuning_files`):
    only when all are the root project's and nothing was added."""
    _, tree, parse_file = dirs
    parse = read_failing_parse(parse_file)
    assert parse is not None
    unchanged = candidate_changes(parse, tree)
    assert unchanged is not None and unchanged.files == ()
    (tree / "models/staging/stg_orders.sql").write_text("select 2 as id\n")
    (tree / "tests/assert_positive.sql").write_text("select 2 where false\n")
    changes = candidate_changes(parse, tree)
    assert changes is not None
    assert changes.files == ("models/staging/stg_orders.sql", "tests/assert_positive.sql")
    (tree / "dbt_packages/util/models/util_dates.sql").write_text("select 2 as d\n")
    in_package = candidate_changes(parse, tree)
    assert in_package is not None and in_package.names == (
        "assert_positive", "stg_orders", "util_dates")  # fmt: skip
    assert in_package.files is None
    (tree / "dbt_packages/util/models/util_dates.sql").write_text(PROJECT[
        "dbt_packages/util/models/util_dates.sql"])  # fmt: skip
    (tree / "models/revenue.sql").write_text("select 1\n")
    added = candidate_changes(parse, tree)
    assert added is not None and "revenue" in added.names and added.files is None


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


def _manifest(
    user: Path, dest: Path, invocation: str = "run-2", macro: str = "{{ x }} * 100", **sums: str
) -> Path:
    """The failing run's manifest.json: its nodes (with the root project's file checksums)
    and macros; another run's (`invocation`) unless it is the parse's own."""
    nodes = _nodes()
    for rel, (_, ids) in NODES.items():
        if ids and not rel.startswith("dbt_packages/") and rel != "seeds/big_events.csv":
            digest = sums.get(Path(rel).stem) or file_checksum(user / rel)
            nodes[ids[0]] |= {"original_file_path": rel,
                              "checksum": {"name": "sha256", "checksum": digest}}  # fmt: skip
    data = {
        "metadata": {"project_name": "shop", "invocation_id": invocation},
        "nodes": nodes,
        "macros": {"macro.shop.cents": {"package_name": "shop", "macro_sql": macro}},
    }
    dest.write_text(json.dumps(data))
    return dest


def test_the_parse_is_used_only_when_it_agrees_with_the_failing_runs_manifest(
    dirs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    user, _, parse_file = dirs
    parse = read_failing_parse(parse_file)
    assert parse is not None
    same = _manifest(user, tmp_path / "same.json")
    # another run's manifest with the same files: a parse dbt had no reason to rewrite
    assert agrees_with_manifest(parse, same)
    # the relations the run knows, packages' too (tests are no relations)
    assert manifest_node_names(same) == {
        "stg_orders", "orders", "raw_orders", "orders_history", "util_dates", "big_events"
    }  # fmt: skip
    # a parse a later run rewrote after the user edited a model: not the failing run's files
    later = _manifest(user, tmp_path / "later.json", stg_orders="3" * 64)
    assert not agrees_with_manifest(parse, later)
    # the parse's own run agrees whatever else (it wrote both)
    assert agrees_with_manifest(parse, _manifest(user, tmp_path / "own.json", "run-1", "x"))
    # a macro or a node's YAML-set fields that differ: another run's files
    assert not agrees_with_manifest(parse, _manifest(user, tmp_path / "m.json", macro="x"))
    described = json.loads(same.read_text())
    described["nodes"]["model.shop.orders"]["description"] = "Orders, one row each"
    (tmp_path / "described.json").write_text(json.dumps(described))
    assert not agrees_with_manifest(parse, tmp_path / "described.json")
    assert not agrees_with_manifest(parse, tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{")
    assert not agrees_with_manifest(parse, tmp_path / "broken.json")


def test_a_parse_recorded_relative_to_the_project_still_sees_its_packages(tmp_path: Path) -> None:
    user, tree = tmp_path / "user", tmp_path / "tree"
    _write(user)
    parse_file = _parse_file(user, tmp_path / "p.msgpack", root_text=".")
    shutil.copytree(user, tree)
    parse = read_failing_parse(parse_file)
    assert parse is not None and set(parse.project_hashes) == {"", "dbt_packages/util"}
    (tree / "dbt_packages/util/models/util_dates.sql").write_text("select 3 as d\n")
    assert changed_node_names(parse, tree) == ("util_dates",)
    (tree / "dbt_packages/util/dbt_project.yml").write_text("name: util\nversion: 2\n")
    assert changed_node_names(parse, tree) is None


@pytest.mark.parametrize(
    "new",
    [
        "models/logs/extra.yml",  # dbt walks every directory
        "models/.hidden/x.yml",
        "models/marts/target/new.yml",
        "models/props.YML",  # and matches suffixes in any case
        "functions/props.yml",  # function-paths (dbt 1.11)
        "tests/fixtures/orders_rows.sql",  # a unit test's fixture
    ],
)
def test_new_files_anywhere_dbt_reads_fall_back(dirs: tuple[Path, Path, Path], new: str) -> None:
    path = dirs[1] / new
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x\n")
    assert _changed(dirs) is None


def test_a_new_model_in_any_directory_or_case_is_named(dirs: tuple[Path, Path, Path]) -> None:
    (dirs[1] / "models/logs").mkdir()
    (dirs[1] / "models/logs/log_events.SQL").write_text("select 1\n")
    assert _changed(dirs) == ("log_events",)


@pytest.mark.parametrize("paths", ['["."]', '["/abs/models"]', '["../shared"]'])
def test_paths_a_walk_cannot_match_fall_back(dirs: tuple[Path, Path, Path], paths: str) -> None:
    _, tree, parse_file = dirs
    parse = read_failing_parse(parse_file)
    assert parse is not None
    project = tree / "dbt_project.yml"
    project.write_text(project.read_text() + f"model-paths: {paths}\n")
    # the project file differs from the parse's, so the check falls back anyway; the walk's
    # own refusal is what protects a project whose file says so from the start
    from patchit.evidence.project_index import read_project_config
    from patchit.harnesses.dbt.changes import _new_files

    assert _new_files(parse, tree, read_project_config(tree)) is None


def test_names_a_selector_would_split_and_an_ignore_file_fall_back(
    dirs: tuple[Path, Path, Path],
) -> None:
    tree = dirs[1]
    (tree / "models/my model.sql").write_text("select 1\n")
    assert _changed(dirs) is None
    (tree / "models/my model.sql").unlink()
    (tree / "models/v2.orders.sql").write_text("select 1\n")
    assert _changed(dirs) is None
    (tree / "models/v2.orders.sql").unlink()
    assert _changed(dirs) == ()
    (tree / ".dbtignore").write_text("models/overview.md\n")
    assert _changed(dirs) is None

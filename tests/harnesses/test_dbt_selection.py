"""How DbtHarness chooses what to run and how it judges the result (no dbt needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.evidence.redact import MASK
from patchit.harnesses.dbt.changes import models_of_tests
from patchit.harnesses.dbt.pg import PgSchemas
from patchit.harnesses.dbt.preparation import prepare, settle_warehouse, start_warehouse
from patchit.harnesses.dbt.units import (
    FRESH,
    MAX_UNBUILT_SELECTORS,
    DbtOutcome,
    judge_outcome,
    node_selector,
    replay_env,
    select_units,
    unbuilt_nodes,
    unit_verdicts,
)
from patchit.sandbox.snapshot import warehouse_relations


@pytest.mark.parametrize(
    ("unique_id", "selector"),
    [
        ("model.shop.orders", "orders"),
        ("model.shop.orders.v2", "orders.v2"),
        ("seed.shop.raw_orders", "raw_orders"),
        ("test.shop.not_null_orders_order_id.5fb22c2710", "not_null_orders_order_id"),
        ("source.shop.raw.payments", "source:raw.payments"),
        ("shop", None),
        ("load_orders", None),
    ],
)
def test_node_selector(unique_id: str, selector: str | None) -> None:
    assert node_selector(unique_id) == selector


def test_select_units_adds_related_units_and_state() -> None:
    event = UniversalFailureEvent(
        source="dbt",
        pipeline_id="shop",
        unit_id="model.shop.orders",
        context={"related_units": ["model.shop.customers", "model.shop.orders"]},
    )
    assert select_units(event, with_state=False) == ["orders+", "customers+"]
    assert select_units(event, with_state=True)[-1] == "state:modified+"


def test_a_failed_tests_model_is_selected_with_its_descendants(tmp_path: Path) -> None:
    """The failing run skipped what is downstream of a failed test's model; a candidate is
    verified on it too (jaffle-shop: a rename completed in stg_orders' test expression while
    orders and its own test still read the old column)."""
    old = "test.shop.dbt_utils_expression_is_true_stg_orders_order_total_tax_paid_subtotal.bf"
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"metadata": {"project_name": "shop"}, "nodes": {
        "model.shop.stg_orders": {"resource_type": "model", "name": "stg_orders"},
        old: {"resource_type": "test", "attached_node": "model.shop.stg_orders",
              "name": old.split(".")[2]},
    }}))  # fmt: skip
    tested = models_of_tests(manifest)
    assert tested[old] == tested[old.split(".")[2]] == "stg_orders"
    event = UniversalFailureEvent(source="dbt", pipeline_id="shop", unit_id=old)
    assert select_units(event, with_state=False, tested=tested) == [
        "stg_orders+",
        "dbt_utils_expression_is_true_stg_orders_order_total_tax_paid_subtotal+",
    ]
    # renamed by the candidate: the new test by its new name, the model by the old id
    new = "test.shop.dbt_utils_expression_is_true_stg_orders_order_total_usd_tax_paid_subtotal"
    followed = event.model_copy(update={"unit_id": new,
                                        "context": {"units_before_renames": [old]}})  # fmt: skip
    assert select_units(followed, with_state=False, tested=tested) == [
        "dbt_utils_expression_is_true_stg_orders_order_total_usd_tax_paid_subtotal+",
        "stg_orders+",
    ]
    # its verdict is read by name, whatever hash dbt gives the renamed test
    ran = DbtOutcome(success=True, results=[{"unique_id": f"{new}.0c1d", "status": "pass"}])
    assert unit_verdicts(ran, [new], True) == {new: "pass"}


@pytest.mark.parametrize(
    ("unit_id", "selected"),
    [
        # what the file describes and its tests: state:modified alone selects nothing for an
        # emptied test list or a column's description
        ("file:models/marts/schema.yml", ["path:models/marts/schema.yml+", "state:modified+"]),
        ("file:models/a b.yml", ["state:modified+"]),  # a selector cannot hold the space
        ("file:dbt_project.yml", ["path:dbt_project.yml+", "state:modified+"]),
        ("file:models/orders.sql", ["state:modified+"]),
        ("project.shop", ["state:modified+"]),
    ],
)
def test_a_yaml_files_unit_selects_what_it_describes(unit_id: str, selected: list[str]) -> None:
    event = UniversalFailureEvent(source="dbt", pipeline_id="shop", unit_id=unit_id)
    assert select_units(event, with_state=True) == selected


def test_a_yaml_files_unit_on_a_fresh_warehouse_builds_what_it_describes_from_its_seeds() -> None:
    """A fresh checkout whose run failed at parse time has no database: what the file
    describes needs its upstream (seeds, staging) built in the same run."""
    event = UniversalFailureEvent(source="dbt", pipeline_id="shop",
                                  unit_id="file:models/staging/schema.yml")  # fmt: skip
    assert select_units(event, False, FRESH) == [
        "path:models/staging/schema.yml+", "@path:models/staging/schema.yml"
    ]  # fmt: skip
    assert select_units(event, False, ("raw_orders",)) == [
        "path:models/staging/schema.yml+", "@path:models/staging/schema.yml,raw_orders"
    ]  # fmt: skip


def test_nodes_the_warehouse_lacks_are_built_first_when_upstream() -> None:
    event = UniversalFailureEvent(
        source="dbt", pipeline_id="shop", unit_id="model.shop.orders",
        context={"related_units": ["model.shop.customers"]},
    )  # fmt: skip
    # `@unit,name`: the name, if it is upstream of anything the run builds (dbt decides)
    assert select_units(event, with_state=False, unbuilt=("stg_shopify_orders",)) == [
        "orders+", "@orders,stg_shopify_orders", "customers+", "@customers,stg_shopify_orders"
    ]  # fmt: skip
    # no warehouse at all: everything upstream of what the run builds
    assert select_units(event, with_state=True, unbuilt=FRESH) == [
        "orders+", "@orders", "customers+", "@customers", "state:modified+"
    ]  # fmt: skip
    many = tuple(f"m{i}" for i in range(MAX_UNBUILT_SELECTORS + 1))
    assert select_units(event, with_state=False, unbuilt=many)[:2] == ["orders+", "@orders"]


def test_unbuilt_nodes_are_the_names_with_no_relation() -> None:
    names = ["stg_orders", "stg_shopify_orders", "Orders", "raw_orders"]
    relations = {"stg_orders", "orders", "raw_orders"}  # DuckDB folds identifier case
    assert unbuilt_nodes(names, relations) == ("stg_shopify_orders",)
    assert unbuilt_nodes(names, None) is FRESH
    assert unbuilt_nodes([], set()) == ()


def test_warehouse_relations_reads_a_copy_and_says_when_there_is_none(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "copy.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("create table stg_orders as select 1 as id")
        con.execute("create schema marts")
        con.execute("create view marts.orders as select * from stg_orders")
    assert warehouse_relations(db) == {"stg_orders", "orders"}
    assert warehouse_relations(tmp_path / "missing.duckdb") is None
    assert warehouse_relations(None) is None
    (tmp_path / "junk.duckdb").write_text("not a database")
    assert warehouse_relations(tmp_path / "junk.duckdb") == set()  # unreadable: build it all


def ok(unique_id: str, status: str = "success") -> dict[str, str]:
    return {"unique_id": unique_id, "status": status, "message": "", "resource_type": "model"}


def test_judge_outcome() -> None:
    unit = "model.shop.orders"
    good = DbtOutcome(success=True, results=[ok(unit), ok("test.shop.t.1", "pass")])
    assert judge_outcome(good, unit) == (True, [])
    failing = DbtOutcome(success=False, results=[ok(unit, "error"), ok("test.shop.t.1", "skipped")])
    assert judge_outcome(failing, unit) == (False, [unit, "test.shop.t.1"])
    # Green but the failed unit never ran (selected nothing): not a verified fix.
    assert judge_outcome(DbtOutcome(success=True, results=[ok("model.shop.x")]), unit) == (
        False,
        [unit],
    )
    assert judge_outcome(DbtOutcome(success=True), "shop") == (False, [])
    timed_out = DbtOutcome(success=True, results=[ok(unit)], timed_out=True)
    assert judge_outcome(timed_out, unit)[0] is False


def test_judge_outcome_wants_every_unit_of_the_incident_to_run_and_pass() -> None:
    """Issue 28: a candidate that fixes one of an incident's two failing models is no fix."""
    unit, other = "model.shop.plans", "model.shop.revenue"
    both = DbtOutcome(success=True, results=[ok(unit), ok(other), ok("test.shop.t.1", "pass")])
    assert judge_outcome(both, unit, [other]) == (True, [])
    assert unit_verdicts(both, [unit, other], True) == {unit: "success", other: "success"}
    # green, but the related model was not in the run: not verified
    one = DbtOutcome(success=True, results=[ok(unit)])
    assert judge_outcome(one, unit, [other]) == (False, [other])
    assert unit_verdicts(one, [unit, other], False) == {unit: "success", other: "not run"}
    still = DbtOutcome(success=False, results=[ok(unit), ok(other, "error")])
    assert judge_outcome(still, unit, [other]) == (False, [other])
    yaml = "file:models/schema.yml"  # no node: judged by the run as a whole
    assert judge_outcome(both, unit, [yaml]) == (True, [])
    assert unit_verdicts(still, [unit, yaml], False)[yaml] == "error"


def test_replay_env_drops_sandbox_paths_and_unknown_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DBT_ENV_SECRET_TOKEN", "from-patchit-env")
    monkeypatch.delenv("DBT_ENV_SECRET_OTHER", raising=False)
    dbt = DbtInvocation(
        command="build",
        project_dir="/p",
        cwd="/p",
        env={
            "DBT_PROFILES_DIR": "/home/dana/.dbt",
            "DBT_TARGET_PATH": "/p/target",
            "DBT_PARTIAL_PARSE_FILE_PATH": "/p/target/partial_parse.msgpack",
            "DBT_ENV_SECRET_TOKEN": MASK,
            "DBT_ENV_SECRET_OTHER": MASK,
            "DBT_ENV_CUSTOM_ENV_TEAM": "growth",
        },
    )
    event = UniversalFailureEvent(source="dbt", pipeline_id="p", unit_id="model.p.a", dbt=dbt)
    env = replay_env(event)
    assert env["DBT_ENV_CUSTOM_ENV_TEAM"] == "growth"
    assert env["DBT_ENV_SECRET_TOKEN"] == "from-patchit-env"
    assert "DBT_ENV_SECRET_OTHER" not in env
    assert "DBT_PROFILES_DIR" not in env and "DBT_TARGET_PATH" not in env
    assert "DBT_PARTIAL_PARSE_FILE_PATH" not in env  # the sandbox must not write the user's
    assert env["DBT_SEND_ANONYMOUS_USAGE_STATS"] == "false"


def prepared_args(tmp_path: Path, snapshot: Path | None, db_path: str = "shop.duckdb") -> list[str]:
    """The dbt arguments DbtHarness prepares for a worktree of a two-model project whose
    profile's DuckDB `path:` is `db_path` (no dbt runs: `prepare` only lays out the sandbox)."""
    from patchit.harnesses.base import Workspace

    user = tmp_path / "user"
    root = tmp_path / "worktree"
    for project in (user, root):
        (project / "models").mkdir(parents=True)
        (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
        (project / "profiles.yml").write_text(
            "shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
            f"      path: {db_path}\n"
        )
    (root / "models" / "stg_shopify_orders.sql").write_text("select 1 as id\n")  # renamed
    (root / "models" / "orders.sql").write_text("select * from {{ ref('stg_shopify_orders') }}\n")
    event = UniversalFailureEvent(
        source="dbt", pipeline_id="shop", unit_id="model.shop.orders", repo_path=str(user),
        dbt=DbtInvocation(command="build", project_dir=str(user), cwd=str(user),
                          profiles_dir=str(user)),
    )  # fmt: skip
    workspace = Workspace(root=root, scratch=tmp_path / "scratch", snapshot=snapshot)
    box = prepare(workspace, event, root, root, PgSchemas())
    start_warehouse(box)  # as the harness does beside the run: the warehouse placed
    settle_warehouse(box)
    return box.args


def snapshot_of(tmp_path: Path) -> Path:
    """An incident snapshot of yesterday's build: `stg_orders` and `orders`."""
    import duckdb

    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    with duckdb.connect(str(snapshot / "shop.duckdb")) as con:  # yesterday's build
        con.execute("create table stg_orders as select 1 as id")
        con.execute("create table orders as select 1 as id")
    return snapshot


def test_the_sandbox_builds_a_model_its_snapshot_lacks(tmp_path: Path) -> None:
    args = prepared_args(tmp_path, snapshot_of(tmp_path))
    assert args[args.index("--select") + 1 : args.index("--project-dir")] == [
        "orders+", "@orders,stg_shopify_orders"
    ]  # fmt: skip
    assert (tmp_path / "worktree" / "shop.duckdb").is_file()  # the candidate's own copy


def test_a_checkout_with_no_database_builds_on_a_fresh_one(tmp_path: Path) -> None:
    args = prepared_args(tmp_path, None)  # no snapshot, and no shop.duckdb at the user's path
    assert args[args.index("--select") + 1 : args.index("--project-dir")] == ["orders+", "@orders"]
    assert not (tmp_path / "worktree" / "shop.duckdb").exists()  # dbt creates it
    # only the tests whose parents the run builds: a relationships test to a node outside
    # the selection has no relation to read on a fresh warehouse
    assert args[args.index("--indirect-selection") + 1] == "buildable"
    assert "--indirect-selection" not in prepared_args(tmp_path / "built", snapshot_of(tmp_path))


def test_a_database_under_the_target_folder_is_placed_where_the_profile_says(
    tmp_path: Path,
) -> None:
    """`path: target/shop.duckdb`: the user's dbt made `target/`, the sandbox moves dbt's
    target path to its scratch, so the worktree's `target/` is the sandbox's to make."""
    import duckdb

    args = prepared_args(tmp_path / "fresh", None, "target/shop.duckdb")  # a fresh clone
    tree = tmp_path / "fresh" / "worktree"
    assert (tree / "target").is_dir() and not (tree / "target" / "shop.duckdb").exists()
    profile = (Path(args[args.index("--profiles-dir") + 1]) / "profiles.yml").read_text()
    assert "path: target/shop.duckdb" in profile  # as the user's run resolves it
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    with duckdb.connect(str(snapshot / "shop.duckdb")) as con:
        con.execute("create table stg_orders as select 1 as id")
    prepared_args(tmp_path / "copied", snapshot, "target/shop.duckdb")
    copy = tmp_path / "copied" / "worktree" / "target" / "shop.duckdb"
    assert copy.read_bytes() == (snapshot / "shop.duckdb").read_bytes()
    assert not (tmp_path / "copied" / "user" / "target").exists()  # the user's tree: untouched


def test_the_relations_are_read_once_per_incident_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    from patchit.harnesses.base import Workspace
    from patchit.harnesses.dbt import preparation as dbt_prepare

    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    with duckdb.connect(str(snapshot / "shop.duckdb")) as con:
        con.execute("create table stg_orders as select 1 as id")
    reads: list[Path | None] = []

    def counted(db: Path | None) -> set[str] | None:
        reads.append(db)
        return warehouse_relations(db)

    monkeypatch.setattr(dbt_prepare, "warehouse_relations", counted)
    workspace = Workspace(root=tmp_path / "tree", scratch=tmp_path / "scratch", snapshot=snapshot)
    copies = []
    for n in range(3):  # each candidate's copy of the snapshot
        copy = tmp_path / f"c{n}" / "shop.duckdb"
        copy.parent.mkdir()
        copy.write_bytes((snapshot / "shop.duckdb").read_bytes())
        copies.append(dbt_prepare._relations(workspace, "shop.duckdb", copy))
    assert copies == [{"stg_orders"}] * 3
    assert reads == [tmp_path / "c0" / "shop.duckdb"]  # the first copy, never the snapshot
    with duckdb.connect(str(snapshot / "shop.duckdb")) as con:  # another incident's snapshot
        con.execute("create table orders as select 1 as id")
    again = tmp_path / "c3" / "shop.duckdb"
    again.parent.mkdir()
    again.write_bytes((snapshot / "shop.duckdb").read_bytes())
    assert dbt_prepare._relations(workspace, "shop.duckdb", again) == {"stg_orders", "orders"}
    assert dbt_prepare._relations(workspace, "shop.duckdb", None) is None  # a fresh warehouse

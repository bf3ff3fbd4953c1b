"""The dbt screen on a small project: a manifest as dbt writes it (the fields the screen
reads), a DuckDB warehouse made with the duckdb library, no dbt process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import duckdb
import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.screen import DbtScreen, Screening, Where

STG = (
    "select id as order_id, status, amount_cents / 100.0 as amount\nfrom {{ ref('raw_orders') }}\n"
)
ORDERS = (
    "{{ config(materialized='table') }}\n"
    "select o.order_id, o.status, o.amount, u.email\n"
    "from {{ ref('stg_orders') }} as o\n"
    "left join {{ source('app', 'users') }} as u on u.user_id = o.order_id\n"
)
DAILY = "select status, sum(amount) as revenue\nfrom {{ ref('orders') }}\ngroup by status\n"
PAYMENTS = (
    "select id, {{ cents_to_dollars('amount_cents') }} as amount\nfrom {{ ref('raw_orders') }}\n"
)
FILES = {
    "models/staging/stg_orders.sql": STG,
    "models/marts/orders.sql": ORDERS,
    "models/marts/daily_revenue.sql": DAILY,
    "models/staging/stg_payments.sql": PAYMENTS,
}
REL = '"shop"."main".'


def _node(uid: str, path: str, raw: str, parents: list[str]) -> dict[str, object]:
    kind, package, name = uid.split(".")
    return {
        "unique_id": uid, "resource_type": kind, "package_name": package, "name": name,
        "alias": name, "database": "shop", "schema": "main", "original_file_path": path,
        "relation_name": f'{REL}"{name}"', "raw_code": raw, "language": "sql",
        "depends_on": {"nodes": parents, "macros": []},
    }  # fmt: skip


def manifest() -> dict[str, object]:
    nodes = {
        "seed.shop.raw_orders": _node("seed.shop.raw_orders", "seeds/raw_orders.csv", "", []),
        "model.shop.stg_orders": _node(
            "model.shop.stg_orders", "models/staging/stg_orders.sql", STG, ["seed.shop.raw_orders"]
        ),
        "model.shop.orders": _node(
            "model.shop.orders", "models/marts/orders.sql", ORDERS, ["model.shop.stg_orders"]
        ),
        "model.shop.daily_revenue": _node(
            "model.shop.daily_revenue", "models/marts/daily_revenue.sql", DAILY,
            ["model.shop.orders"],
        ),
        "model.shop.stg_payments": _node(
            "model.shop.stg_payments", "models/staging/stg_payments.sql", PAYMENTS,
            ["seed.shop.raw_orders"],
        ),
    }  # fmt: skip
    # what dbt compiled in the failing run (the light render must reproduce it)
    nodes["model.shop.stg_orders"]["compiled_code"] = STG.replace(
        "{{ ref('raw_orders') }}", f'{REL}"raw_orders"'
    )
    return {
        "metadata": {"project_name": "shop"},
        "nodes": nodes,
        "sources": {
            "source.shop.app.users": {
                "unique_id": "source.shop.app.users", "resource_type": "source",
                "source_name": "app", "name": "users", "identifier": "users",
                "database": "shop", "schema": "app", "relation_name": '"shop"."app"."users"',
            }
        },
        "macros": {
            "macro.shop.cents_to_dollars": {"name": "cents_to_dollars", "package_name": "shop"},
            "macro.dbt.ref": {"name": "ref", "package_name": "dbt"},
        },
        "child_map": {
            "seed.shop.raw_orders": ["model.shop.stg_orders", "model.shop.stg_payments"],
            "model.shop.stg_orders": ["model.shop.orders"],
            "model.shop.orders": ["model.shop.daily_revenue"],
            "model.shop.daily_revenue": [],
            "model.shop.stg_payments": [],
            "source.shop.app.users": ["model.shop.orders"],
        },
    }  # fmt: skip


@dataclass
class Project:
    root: Path
    where: Where
    event: UniversalFailureEvent
    screen: DbtScreen

    def write(self, rel: str, text: str) -> str:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return rel

    def edit(self, rel: str, old: str, new: str) -> str:
        text = (self.root / rel).read_text()
        assert old in text
        return self.write(rel, text.replace(old, new))

    def run(self, *changed: str) -> Screening:
        return self.screen.screen(self.where, self.event, list(changed))


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "worktree"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    (root / "profiles.yml").write_text(
        "shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: shop.duckdb\n"
    )
    (root / "target").mkdir()
    (root / "target" / "manifest.json").write_text(json.dumps(manifest()))
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    with duckdb.connect(str(snapshot / "shop.duckdb")) as con:
        con.execute("create table raw_orders (id integer, status varchar, amount_cents integer)")
        con.execute("create view stg_orders as select id as order_id, status, "
                    "amount_cents / 100.0 as amount from raw_orders")  # fmt: skip
        con.execute("create table orders as select *, 'a' as email from stg_orders")
        con.execute("create schema app")
        con.execute("create table app.users (user_id integer, email varchar)")
    event = UniversalFailureEvent(
        source="dbt", pipeline_id="shop", unit_id="model.shop.orders", repo_path=str(root),
        artifacts={"manifest": str(root / "target" / "manifest.json")},
        dbt=DbtInvocation(command="build", args=["build"], project_dir=str(root), cwd=str(root)),
    )  # fmt: skip
    screen = DbtScreen()
    yield Project(root, Where(root, PurePosixPath("."), snapshot), event, screen)
    screen.close()


def test_a_model_that_binds_passes_and_the_clone_is_made_once(project: Project) -> None:
    first = project.run("models/marts/orders.sql")
    assert first.passed, first.reason
    assert first.screened == ["models/marts/orders.sql"]
    assert first.skipped == []
    assert "EXPLAIN" in first.check
    clone_ms, incident = project.screen.clone_ms, project.screen._prepared
    again = project.run(
        project.edit("models/marts/orders.sql", "o.amount,", "o.amount * 2 as amount,")
    )
    assert again.passed, again.reason
    assert project.screen._prepared is incident and project.screen.clone_ms == clone_ms


def test_a_binder_error_rejects_with_duckdbs_message(project: Project) -> None:
    rel = project.edit("models/marts/orders.sql", "o.status,", "o.statuss as status,")
    screening = project.run(rel)
    assert not screening.passed
    assert screening.reason.startswith('models/marts/orders.sql: Binder Error: Table "o" does')
    assert '"statuss"' in screening.reason
    assert "Candidate bindings" in screening.output and "LINE 2:" in screening.output


def test_a_parser_error_rejects(project: Project) -> None:
    rel = project.edit("models/marts/orders.sql", "o.status,", "o.status,,")
    screening = project.run(rel)
    assert not screening.passed
    assert "Parser Error: syntax error" in screening.reason


def test_a_source_binds_against_its_own_schema(project: Project) -> None:
    rel = project.edit("models/marts/orders.sql", "u.email", "u.e_mail")
    screening = project.run(rel)
    assert not screening.passed and '"e_mail"' in screening.reason


def test_jinja_beyond_ref_source_config_is_passed_on(project: Project) -> None:
    rel = project.edit("models/staging/stg_payments.sql", "select id,", "select idd,")
    screening = project.run(rel)
    assert screening.passed
    assert screening.screened == []
    assert screening.skipped == [
        "models/staging/stg_payments.sql: calls cents_to_dollars(), which the screen does "
        "not render"
    ]


def test_a_model_reading_what_the_run_rebuilds_is_passed_on(project: Project) -> None:
    # orders is the failing unit: its relation in the snapshot may be stale
    rel = project.edit("models/marts/daily_revenue.sql", "sum(amount)", "sum(amount_typo)")
    screening = project.run(rel)
    assert screening.passed
    assert "reads model.shop.orders, which the run rebuilds" in screening.skipped[0]


def test_what_dbt_skipped_after_a_failing_test_is_passed_on(project: Project) -> None:
    # a test of stg_orders failed, so `dbt build` skipped orders: its relation in the
    # snapshot is the last build's (a rename stg_orders passes on through a `*` is not in it)
    data = manifest()
    uid = "test.shop.not_null_stg_orders_status"
    data["nodes"][uid] = _node(uid, "models/staging/schema.yml", "", ["model.shop.stg_orders"])  # type: ignore[index]
    data["child_map"]["model.shop.stg_orders"].append(uid)  # type: ignore[index]
    (project.root / "target" / "manifest.json").write_text(json.dumps(data))
    event = project.event.model_copy(update={"unit_id": uid})
    rel = project.edit("models/marts/daily_revenue.sql", "sum(amount)", "sum(amount_typo)")
    screening = project.screen.screen(project.where, event, [rel])
    assert screening.passed, screening.reason
    assert "reads model.shop.orders, which the run rebuilds" in screening.skipped[0]


def test_changed_models_are_bound_in_order_with_their_new_columns(project: Project) -> None:
    # orders gains a column that daily_revenue, changed too, reads
    orders = project.edit("models/marts/orders.sql", "u.email", "u.email, 1 as region")
    daily = project.edit("models/marts/daily_revenue.sql", "select status,", "select region,")
    daily_text = (project.root / daily).read_text()
    project.edit(daily, "group by status", "group by region")
    screening = project.run(daily, orders)
    assert screening.passed, screening.reason
    assert screening.screened == [orders, daily]
    # the same downstream change alone reads a column the snapshot's orders lacks: but orders
    # is rebuilt by the run, so it is passed on, never rejected
    project.write(orders, ORDERS)
    assert project.run(daily).passed
    # a downstream typo against the new columns is rejected
    project.write(orders, ORDERS.replace("u.email", "u.email, 1 as region"))
    project.write(daily, daily_text.replace("select region,", "select regoin,"))
    project.edit(daily, "group by status", "group by regoin")
    rejected = project.run(orders, daily)
    assert not rejected.passed and '"regoin"' in rejected.reason
    # and the clone is back to the snapshot's shapes for the next candidate
    project.write(daily, DAILY)
    project.write(orders, ORDERS)
    assert project.screen._prepared is not None
    with pytest.raises(Exception, match="region"):
        project.screen._prepared.clone.bind('select region from "shop"."main"."orders"')


@pytest.mark.parametrize(
    ("rel", "text", "why"),
    [
        ("macros/cents_to_dollars.sql", "{% macro cents_to_dollars(c) %}{{ c }}{% endmacro %}",
         "is no model or test the failing run's manifest knows"),
        ("seeds/raw_orders.csv", "id,status\n", "it changes seeds/raw_orders.csv"),
        ("dbt_project.yml", "name: shop\nprofile: shop\nvars: {x: 1}\n", "it changes dbt_project"),
        ("models/sources.yml", "version: 2\nsources:\n  - name: app\n", "declares sources"),
        ("models/schema.yml", "models:\n  - name: orders\n    config: {alias: o2}\n",
         "configures model 'orders'"),
        ("models/marts/new_model.sql", "select 1", "is no model or test"),
    ],
)  # fmt: skip
def test_a_change_that_may_shape_relations_leaves_the_sql_unjudged(
    project: Project, rel: str, text: str, why: str
) -> None:
    bad = project.edit("models/marts/orders.sql", "o.status,", "o.statuss,")
    screening = project.run(bad, project.write(rel, text))
    assert screening.passed
    assert screening.screened == []
    assert why in screening.skipped[0]


def test_property_files_that_only_describe_are_fine(project: Project) -> None:
    props = project.write(
        "models/schema.yml",
        "version: 2\nmodels:\n  - name: orders\n    description: one row per order\n"
        "    columns:\n      - name: status\n        data_tests: [not_null]\n",
    )
    docs = project.write("models/docs.md", "{% docs orders %}Orders{% enddocs %}")
    bad = project.edit("models/marts/orders.sql", "o.status,", "o.statuss,")
    assert not project.run(bad, props, docs).passed


def test_a_project_that_overrides_ref_is_not_screened(project: Project) -> None:
    data = manifest()
    data["macros"]["macro.shop.ref"] = {  # type: ignore[index]
        "name": "ref", "package_name": "shop", "unique_id": "macro.shop.ref",
    }  # fmt: skip
    (project.root / "target" / "manifest.json").write_text(json.dumps(data))
    bad = project.edit("models/marts/orders.sql", "o.status,", "o.statuss,")
    screening = project.run(bad)
    assert screening.passed and "overrides ref()" in screening.skipped[0]


def test_a_render_that_differs_from_dbts_compiled_sql_is_not_trusted(project: Project) -> None:
    data = manifest()
    node = data["nodes"]["model.shop.stg_orders"]  # type: ignore[index]
    node["compiled_code"] = 'select 1 from "elsewhere"."raw_orders"'
    (project.root / "target" / "manifest.json").write_text(json.dumps(data))
    bad = project.edit("models/staging/stg_orders.sql", "status,", "statuss,")
    screening = project.run(bad)
    assert screening.passed
    assert "differs from dbt's compiled SQL" in screening.skipped[0]


def test_without_manifest_or_snapshot_nothing_is_judged(project: Project) -> None:
    bad = project.edit("models/marts/orders.sql", "o.status,", "o.statuss,")
    no_snapshot = Where(project.root, project.where.project, None)
    screening = project.screen.screen(no_snapshot, project.event, [bad])
    assert screening.passed and "no warehouse snapshot" in screening.skipped[0]
    project.event.artifacts.clear()
    screening = project.run(bad)
    assert screening.passed and "no manifest" in screening.skipped[0]


def test_sql_that_is_not_one_select_is_passed_on_and_changes_nothing(project: Project) -> None:
    orders = "models/marts/orders.sql"
    project.write(orders, "select 1 as x; drop table {{ ref('stg_orders') }}")
    screening = project.run(orders)
    assert screening.passed and "exactly one SELECT" in screening.skipped[0]
    project.write(orders, ORDERS.replace("o.status,", "o.statuss,"))
    assert not project.run(orders).passed  # stg_orders is still there to bind against


def test_a_changed_python_file_that_does_not_compile_rejects(project: Project) -> None:
    rel = project.write("models/py_model.py", "def model(dbt, session):\n    return dbt.ref('x'\n")
    screening = project.run(rel, "models/marts/orders.sql")
    assert not screening.passed
    assert screening.reason.startswith("SyntaxError")


def test_a_project_in_a_subdirectory(project: Project, tmp_path: Path) -> None:
    where = Where(project.root.parent, PurePosixPath("worktree"), project.where.snapshot)
    bad = "worktree/" + project.edit("models/marts/orders.sql", "o.status,", "o.statuss,")
    screening = project.screen.screen(where, project.event, [bad, "README.md"])
    assert not screening.passed
    assert screening.reason.startswith("worktree/models/marts/orders.sql: Binder Error")

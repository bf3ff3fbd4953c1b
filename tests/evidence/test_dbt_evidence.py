"""Evidence for dbt nodes, gathered from a real git repo and a real DuckDB snapshot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchit.errors import BadInputError
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.dbt import gather_dbt_evidence, parse_refs
from tests.conftest import commit_all, git

SECRET = "Tr0ub4dor-and-3"

BINDER = (
    "Runtime Error in model orders (models/marts/orders.sql)\n"
    '  Binder Error: Values list "o" does not have a column named "statsu"\n  \n'
    "  LINE 14:     o.statsu,\n               ^^^^^^^^"
)


def _event(repo: Path, unit_id: str, unit_path: str, **kw: object) -> UniversalFailureEvent:
    return UniversalFailureEvent.model_validate(
        {
            "source": FailureSource.DBT,
            "pipeline_id": "shop",
            "unit_id": unit_id,
            "unit_path": unit_path,
            "repo_path": str(repo),
            "commit": git(repo, "rev-parse", "HEAD"),
            "dbt": DbtInvocation(
                command="build", project_dir=str(repo), profiles_dir=str(repo), cwd=str(repo)
            ),
            **kw,
        }
    )


@pytest.fixture
def broken_repo(shop_repo: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    """shop_repo + a prod output with a password + a typo committed in orders.sql."""
    profiles = shop_repo / "profiles.yml"
    profiles.write_text(
        profiles.read_text()
        + f"    prod:\n      type: postgres\n      user: dana\n      password: {SECRET}\n"
    )
    good = commit_all(shop_repo, "profiles: add prod")
    orders = shop_repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text().replace("o.status,", "o.statsu,"))
    commit_all(shop_repo, "orders: tidy columns")
    snapshot = tmp_path / "snapshot.duckdb"
    shutil.copy(shop_repo / "shop.duckdb", snapshot)
    return shop_repo, snapshot, good


def test_model_evidence_has_code_upstream_columns_history_and_no_secret(
    broken_repo: tuple[Path, Path, str],
) -> None:
    repo, snapshot, _good = broken_repo
    event = _event(
        repo,
        "model.shop.orders",
        "models/marts/orders.sql",
        error_type="Runtime Error",
        error_message=BINDER + f"\n  while connecting with password={SECRET}",
        context={
            "compiled_code": 'select o.statsu from "shop"."main"."stg_orders" as o left join '
            f'"shop"."main"."order_payments" as p using (order_id) -- {SECRET}'
        },
    )
    ev = gather_dbt_evidence(event, repo, db_snapshot=snapshot)

    assert ev.unit_name == "orders" and ev.project_dir == "."
    assert ev.raw_code is not None and "o.statsu," in ev.raw_code
    assert ev.compiled_code is not None and ev.compiled_code.startswith("select o.statsu")
    by_name = {r.name: r for r in ev.upstream}
    assert list(by_name) == ["stg_orders", "order_payments"]
    assert by_name["stg_orders"].columns == ["order_id", "customer_id", "order_date", "status"]
    assert by_name["stg_orders"].unique_id == "model.shop.stg_orders"
    assert by_name["stg_orders"].relation == "snapshot.main.stg_orders"
    assert by_name["order_payments"].columns[:2] == ["order_id", "amount"]
    assert ev.changed_files == ["models/marts/orders.sql"]
    assert ev.unit_changed
    assert ev.git_log[0].endswith("Dana Engineer orders: tidy columns")
    assert len(ev.git_log) == 2
    assert list(ev.properties) == ["models/marts/schema.yml"]
    assert {"unique(order_id)", "not_null(order_id)", "relationships(customer_id)"} <= set(ev.tests)
    assert "orders" in ev.index.models and "cents_to_dollars" in ev.index.macros
    assert SECRET not in ev.model_dump_json()
    assert "Binder Error" in ev.error


def test_changed_files_since_last_good_commit(broken_repo: tuple[Path, Path, str]) -> None:
    repo, snapshot, good = broken_repo
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    event = _event(repo, "model.shop.orders", "models/marts/orders.sql", error_message=BINDER)
    ev = gather_dbt_evidence(event, repo, last_good_commit=first, db_snapshot=snapshot)
    assert ev.changed_files == ["models/marts/orders.sql", "profiles.yml"]
    assert ev.last_good_commit == first
    ev = gather_dbt_evidence(event, repo, last_good_commit=good)
    assert ev.changed_files == ["models/marts/orders.sql"]


def test_a_last_good_commit_on_another_branch_is_not_the_changes_base(
    broken_repo: tuple[Path, Path, str],
) -> None:
    """A green run on a feature branch is memory's last good commit; the failing commit on
    main does not descend from it, so diffing from it would show the branch's own work,
    reversed, as the breaking change (and the data check's baseline would be the branch's)."""
    repo, _snapshot, good = broken_repo
    failing = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature", good)
    (repo / "models" / "marts" / "feature_only.sql").write_text("select 1 as id\n")
    elsewhere = commit_all(repo, "feature: a model of its own")
    git(repo, "checkout", "-q", "main")
    event = _event(repo, "model.shop.orders", "models/marts/orders.sql", error_message=BINDER)
    assert event.commit == failing

    ev = gather_dbt_evidence(event, repo, last_good_commit=elsewhere)

    assert ev.last_good_commit is None
    assert ev.change_base == good  # the failing commit's parent
    assert ev.changed_files == ["models/marts/orders.sql"]
    assert "feature_only" not in ev.breaking_diff
    assert any("not an ancestor" in note and elsewhere[:12] in note for note in ev.notes)
    on_line = gather_dbt_evidence(event, repo, last_good_commit=good)
    assert on_line.last_good_commit == good and not any("ancestor" in n for n in on_line.notes)


def test_data_test_evidence_names_kind_model_column(broken_repo: tuple[Path, Path, str]) -> None:
    repo, snapshot, _ = broken_repo
    event = _event(
        repo,
        "test.shop.not_null_stg_orders_order_id.81cfe2fe64",
        "models/staging/schema.yml",
        status="fail",
        error_type="test_failure",
        error_message="Got 1 result, configured to fail if != 0",
    )
    ev = gather_dbt_evidence(event, repo, db_snapshot=snapshot)
    assert (ev.test_kind, ev.tested_model, ev.tested_column) == (
        "not_null",
        "stg_orders",
        "order_id",
    )
    assert ev.tested_model_path == "models/staging/stg_orders.sql"
    assert "ref('raw_orders')" in ev.related_code["models/staging/stg_orders.sql"]
    assert ev.raw_code is None
    assert ev.upstream[0].name == "stg_orders"
    assert ev.upstream[0].columns == ["order_id", "customer_id", "order_date", "status"]
    assert "models/staging/schema.yml" in ev.properties
    assert "accepted_values(status)" in ev.tests
    assert ev.changed_files == ["models/marts/orders.sql"]


def test_accepted_values_name_with_arguments_is_split() -> None:
    from patchit.evidence.dbt import _split_test_name
    from patchit.evidence.model import ProjectIndex

    index = ProjectIndex(models=["customers", "customer_segments", "orders", "stg_orders"])
    name = "accepted_values_customer_segments_segment__gold__silver__bronze"
    assert _split_test_name(name, index) == ("accepted_values", "customer_segments", "segment")
    rel = "relationships_orders_customer_id__customer_id__ref_stg_customers_"
    assert _split_test_name(rel, index) == ("relationships", "orders", "customer_id")


def test_missing_optional_pieces_become_notes(shop_repo: Path, tmp_path: Path) -> None:
    event = _event(
        shop_repo, "model.shop.gone", "models/marts/gone.sql", error_message="Compilation Error"
    )
    event = event.model_copy(update={"commit": "0" * 40, "dbt": None})
    ev = gather_dbt_evidence(event, shop_repo, db_snapshot=tmp_path / "absent.duckdb")
    assert ev.raw_code is None
    joined = "\n".join(ev.notes)
    assert "models/marts/gone.sql not readable" in joined
    assert "changed files unavailable" in joined
    assert "no manifest" in joined


def test_unreadable_snapshot_falls_back_to_manifest_columns(
    broken_repo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    repo, _snapshot, _ = broken_repo
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_text("not a database")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        '{"nodes": {"model.shop.stg_orders": {"resource_type": "model", "name": "stg_orders",'
        ' "columns": {"order_id": {}, "status": {}}}}}'
    )
    event = _event(
        repo,
        "model.shop.orders",
        "models/marts/orders.sql",
        artifacts={"manifest": str(manifest)},
    )
    ev = gather_dbt_evidence(event, repo, db_snapshot=bogus)
    assert ev.upstream[0].columns == ["order_id", "status"]
    assert any("bogus.duckdb unreadable" in n for n in ev.notes)


def test_repo_root_must_be_a_directory(tmp_path: Path, shop_repo: Path) -> None:
    event = _event(shop_repo, "model.shop.orders", "models/marts/orders.sql")
    with pytest.raises(BadInputError, match="not a directory"):
        gather_dbt_evidence(event, tmp_path / "nope")


def test_parse_refs_handles_quotes_packages_versions_and_sources() -> None:
    sql = (
        "select * from {{ ref('a') }} join {{ ref(\"pkg\", \"b\") }} join {{ ref('c', v=2) }}"
        " join {{ source('crm', 'accounts') }} join {{ ref('a') }}"
    )
    assert parse_refs(sql) == (["a", "b", "c"], [("crm", "accounts")])


def test_unit_path_outside_the_repo_is_not_read(shop_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.sql"
    outside.write_text("select 'not repo code'")
    event = _event(shop_repo, "model.shop.orders", "../outside.sql")
    ev = gather_dbt_evidence(event, shop_repo)
    assert ev.raw_code is None
    assert any("not readable" in n for n in ev.notes)


def test_relationships_test_uses_manifest_for_kind_column_and_both_models(
    broken_repo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    repo, snapshot, _ = broken_repo
    uid = "test.shop.relationships_orders_customer_id__customer_id__ref_stg_customers_.c0ffee"
    manifest = tmp_path / "manifest.json"
    node = {
        "resource_type": "test",
        "name": uid.split(".")[2],
        "column_name": "customer_id",
        "attached_node": "model.shop.orders",
        "test_metadata": {"name": "relationships", "kwargs": {"column_name": "customer_id"}},
        "depends_on": {"nodes": ["model.shop.stg_customers", "model.shop.orders"]},
        "compiled_code": "select 1 from main.orders",
    }
    manifest.write_text(json.dumps({"nodes": {uid: node}}))
    event = _event(
        repo,
        uid,
        "models/marts/schema.yml",
        status="fail",
        error_message="Got 2 results, configured to fail if != 0",
        artifacts={"manifest": str(manifest)},
    )
    ev = gather_dbt_evidence(event, repo, db_snapshot=snapshot)
    assert (ev.test_kind, ev.tested_model, ev.tested_column) == (
        "relationships",
        "orders",
        "customer_id",
    )
    assert [r.name for r in ev.upstream] == ["orders", "stg_customers"]
    assert "email" in ev.upstream[1].columns
    assert ev.compiled_code == "select 1 from main.orders"
    assert ev.tested_model_path == "models/marts/orders.sql"
    assert "models/marts/schema.yml" in ev.properties

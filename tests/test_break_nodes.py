"""A failing dbt run that built nothing (it failed at parse) leaves the warehouse as the last
good run did: the artifacts the last run wrote a moment before are not this run's, the models
the breaking change edited are rebuilt with the candidate, and the revert searches the unit's
upstream through the refs of the project's files (found on the shop example: a column removed
in an unmerged commit under a model rename; the ref fix passed against the stale model in one
checkout and failed in another, depending on whether the last run's manifest was written
less than a second before the failing run started). Fast: no dbt process."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence, ProjectIndex
from patchit.evidence.unit_files import dependency_files
from patchit.intake.dbt import events_from_run
from patchit.loop.break_nodes import break_node_names, with_break_nodes

PARSE_ERROR = (
    "Compilation Error\n  Model 'model.shop.orders' (models/marts/orders.sql) depends on a node "
    "named 'stg_orders' which was not found"
)


def _artifact(path: Path, invocation: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"metadata": {"dbt_version": "1.11.0", "invocation_id": invocation}, "results": []}
    path.write_text(json.dumps(body))


def _parse_failure(project: Path, invocation: str | None) -> UniversalFailureEvent:
    record = {
        "invocation_id": invocation,
        "exception": {"message": PARSE_ERROR, "type": "CompilationError"},
        "results": [],
    }
    started = datetime.fromtimestamp(time.time() - 0.5, UTC)  # the last run wrote just before
    (event,) = events_from_run(record, ["build"], project, project, "0" * 40, started)
    return event


def test_the_last_runs_artifacts_written_a_moment_before_are_not_the_failing_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    _artifact(tmp_path / "target" / "manifest.json", "the-last-good-run")
    _artifact(tmp_path / "target" / "run_results.json", "the-last-good-run")
    assert _parse_failure(tmp_path, "the-failing-run").artifacts == {}
    # written by the failing run itself: kept
    _artifact(tmp_path / "target" / "manifest.json", "the-failing-run")
    event = _parse_failure(tmp_path, "the-failing-run")
    assert event.artifacts == {"manifest": str((tmp_path / "target" / "manifest.json").resolve())}
    # no invocation id known: written since the run started (within a second) is kept
    assert set(_parse_failure(tmp_path, None).artifacts) == {"manifest", "run_results"}
    old = time.time() - 60
    for name in ("manifest", "run_results"):
        os.utime(tmp_path / "target" / f"{name}.json", (old, old))
    assert _parse_failure(tmp_path, None).artifacts == {}


def _shop(root: Path) -> Path:
    files = {
        "dbt_project.yml": "name: shop\nprofile: shop\nmodel-paths: [transform]\n",
        "transform/staging/stg_payments.sql": "select order_id, amount from raw_payments\n",
        "transform/staging/stg_sales_orders.sql": "select * from raw_orders\n",
        "transform/marts/order_payments.sql": (
            "select order_id, sum(amount) as total from {{ ref('stg_payments') }} group by 1\n"
        ),
        "transform/marts/orders.sql": (
            "select * from {{ ref('stg_orders') }}\n"
            "join {{ ref('order_payments') }} using (order_id)\n"
        ),
        "transform/marts/unrelated.sql": "select 1 as one\n",
        "seeds/raw_orders.csv": "id\n1\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _evidence(root: Path, changed: list[str], manifest: str | None = None) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="shop",
        unit_id="model.shop.orders",
        error_message=PARSE_ERROR,
        repo_path=str(root),
        unit_path="transform/marts/orders.sql",
        artifacts={"manifest": manifest} if manifest else {},
        dbt=DbtInvocation(command="build", project_dir=str(root), cwd=str(root)),
    )
    return Evidence(
        event=event,
        repo_root=str(root),
        project_dir=".",
        unit_path="transform/marts/orders.sql",
        raw_code=(root / "transform/marts/orders.sql").read_text(),
        changed_files=changed,
        index=ProjectIndex(model_paths=["transform"]),
    )


CHANGED = [
    "transform/staging/stg_payments.sql",  # a column removed, unmerged
    "transform/staging/stg_orders.sql",  # renamed away: deleted at the failing commit
    "transform/staging/stg_sales_orders.sql",  # ... and added
    "seeds/raw_orders.csv",
    "README.md",
]


def test_the_models_and_seeds_the_change_edited_are_rebuilt_when_the_run_built_nothing(
    tmp_path: Path,
) -> None:
    evidence = _evidence(_shop(tmp_path), CHANGED)
    assert break_node_names(evidence) == ["raw_orders", "stg_payments", "stg_sales_orders"]
    event = with_break_nodes(evidence.event, evidence)
    assert event.context["break_nodes"] == ["raw_orders", "stg_payments", "stg_sales_orders"]
    # a run that wrote its manifest built what it could: its own selection stands
    built = _evidence(tmp_path, CHANGED, manifest=str(tmp_path / "target" / "manifest.json"))
    assert "break_nodes" not in with_break_nodes(built.event, built).context


def test_without_a_manifest_the_revert_reads_the_units_upstream_through_the_refs(
    tmp_path: Path,
) -> None:
    evidence = _evidence(_shop(tmp_path), CHANGED)
    # orders -> order_payments -> stg_payments: two models up, still the unit's dependency;
    # stg_orders, which it reads directly, too (deleted: nothing of it to walk)
    assert set(dependency_files(evidence, CHANGED, every_macro=False)) == {
        "transform/staging/stg_payments.sql",
        "transform/staging/stg_orders.sql",
    }

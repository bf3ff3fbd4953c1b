"""A source whose column changed type in the warehouse since the last good build is upstream
schema drift (found on a public project, yurizza/classicmodels-dbt-duckdb: `priceEach` of the
`orderdetails` source turned VARCHAR, `fct_order_lines` failed on `*(BIGINT, VARCHAR)` and
patchit called it a code bug and ended `failed`). A green run records its sources' column
types through dbt's own DuckDB connection; a failure compares them with the incident's
snapshot. Fast: DuckDB files made here, no dbt (the loop on real dbt is in
tests/test_dbt_wrapper_drift.py)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.evidence.type_drift import source_type_changes, upstream_sources
from patchit.intake.source_types import recorded_types, run_manifest
from patchit.memory import Memory
from patchit.memory.runlog import RunLog

ERROR = (
    "Binder Error: No function matches the given name and argument types '*(BIGINT, VARCHAR)'."
    " You might need to add explicit type casts."
)
SOURCES = {
    "source.cm.raw_data.orderdetails": {
        "source_name": "raw_data", "name": "orderdetails", "database": "cm",
        "schema": "main", "identifier": "orderdetails",
    },
    "source.cm.raw_data.payments": {
        "source_name": "raw_data", "name": "payments", "database": "cm", "schema": "main",
        "identifier": "payments",
    },
}  # fmt: skip
NODES = {
    "model.cm.stg_orderdetails": {"depends_on": {"nodes": ["source.cm.raw_data.orderdetails"]}},
    "model.cm.fct_order_lines": {"depends_on": {"nodes": ["model.cm.stg_orderdetails"]}},
    "model.cm.fct_payments": {"depends_on": {"nodes": ["source.cm.raw_data.payments"]}},
}


def _warehouse(path: Path, price: str, amount: str = "DOUBLE") -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute(f"create or replace table orderdetails (orderNumber bigint, priceEach {price})")
        con.execute(f"create or replace table payments (amount {amount})")
        con.execute("create or replace view stg_orderdetails as select * from orderdetails")
    return path


def _manifest(path: Path, invocation: str = "run-1") -> Path:
    path.write_text(
        json.dumps({"metadata": {"invocation_id": invocation}, "nodes": NODES, "sources": SOURCES})
    )
    return path


def _event(manifest: Path | None, unit: str = "model.cm.fct_order_lines") -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="cm",
        unit_id=unit,
        error_message=ERROR,
        artifacts={"manifest": str(manifest)} if manifest else {},
        dbt=DbtInvocation(command="build", project_dir="/p", cwd="/p"),
    )


def test_a_source_whose_column_changed_type_is_upstream_drift(tmp_path: Path) -> None:
    good = _warehouse(tmp_path / "cm.duckdb", "DOUBLE")
    manifest = _manifest(tmp_path / "manifest.json")
    with duckdb.connect(str(good)) as con:
        recorded = recorded_types(con, manifest)
    assert recorded is not None
    assert json.loads(recorded)["raw_data.orderdetails"] == {
        "relation": "cm.main.orderdetails",
        "columns": {"orderNumber": "BIGINT", "priceEach": "DOUBLE"},
    }
    # the loader now delivers priceEach as text, and payments.amount as an integer
    (tmp_path / "snap").mkdir()
    snapshot = _warehouse(tmp_path / "snap" / "cm.duckdb", "VARCHAR", amount="BIGINT")
    notes: list[str] = []
    changes = source_type_changes(_event(manifest), recorded, snapshot, notes)
    # only what the failing unit reads: payments is not upstream of fct_order_lines
    assert [c.describe() for c in changes] == ["raw_data.orderdetails.priceEach DOUBLE -> VARCHAR"]
    assert notes == []
    # no manifest (a parse failure): every source's change is evidence
    both = source_type_changes(_event(None), recorded, snapshot, notes)
    assert {c.relation for c in both} == {"raw_data.orderdetails", "raw_data.payments"}
    evidence = Evidence(event=_event(manifest), repo_root=str(tmp_path), error=ERROR,
                        type_changes=changes)  # fmt: skip
    verdict = classify_failure(evidence)
    assert (verdict.cls, verdict.signature) == (FailureClass.DATA_ISSUE, "upstream_type_drift")
    assert "raw_data.orderdetails.priceEach DOUBLE -> VARCHAR" in verdict.reason


def test_nothing_recorded_or_nothing_moved_is_no_drift(tmp_path: Path) -> None:
    good = _warehouse(tmp_path / "cm.duckdb", "DOUBLE")
    manifest = _manifest(tmp_path / "manifest.json")
    with duckdb.connect(str(good)) as con:
        recorded = recorded_types(con, manifest)
    notes: list[str] = []
    assert source_type_changes(_event(manifest), recorded, good, notes) == []
    assert source_type_changes(_event(manifest), None, good, notes) == []
    assert source_type_changes(_event(manifest), "{not json", good, notes) == []
    assert notes and notes[-1].startswith("could not compare the sources' column types")


def test_the_unit_upstream_walk_reaches_sources_through_models() -> None:
    manifest = {"nodes": NODES, "sources": SOURCES}
    assert upstream_sources(manifest, "model.cm.fct_order_lines") == {"raw_data.orderdetails"}
    assert upstream_sources(manifest, "model.cm.unknown") is None


def test_only_a_full_builds_own_manifest_is_read(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    manifest = _manifest(tmp_path / "target" / "manifest.json")
    args = ["build", "--project-dir", str(tmp_path)]
    assert run_manifest(args, "run-1") == manifest
    assert run_manifest(args, "another-run") is None  # the last run's, not this one's
    assert run_manifest([*args, "--select", "orders"], "run-1") is None  # not a full build
    assert run_manifest(["run", "--project-dir", str(tmp_path)], "run-1") is None


def test_the_memory_keeps_the_last_good_builds_source_types(_patchit_home: Path) -> None:
    with Memory.open(_patchit_home) as memory:
        memory.record_green([], ("shop", "a" * 40), "dbt=1.11.16 duckdb=1.11.1", '{"a.b": {}}')
        assert memory.last_good_source_types("shop") == '{"a.b": {}}'
    # a green run's fast path writes it too
    assert RunLog(_patchit_home).record_green([], ("shop", "b" * 40), None, '{"c.d": {}}')
    with Memory.open(_patchit_home) as memory:
        assert memory.last_good_source_types("shop") == '{"c.d": {}}'
        assert memory.last_good_source_types("other") is None

"""A relation missing when the unit read it and there once the run was over (a source over a
seed, read before the seed on a first build): found in the incident's DuckDB snapshot, and
classified as the environment's (`env_mismatch`), not a code bug. Real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.classify.classifier import classify_failure
from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.evidence.run_order import built_after_read

ERROR = (
    "Runtime Error in test source_not_null_raw_raw_claims_claim_id (models/staging/schema.yml)\n"
    "  Catalog Error: Table with name raw_claims does not exist!\n"
    '  Did you mean "information_schema.columns"?\n\n'
    '  LINE 18: from "datavault"."raw"."raw_claims"\n'
    "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
)


def _warehouse(tmp_path: Path, *schemas: str) -> Path:
    path = tmp_path / "datavault.duckdb"
    with duckdb.connect(str(path)) as con:
        for schema in schemas:
            con.execute(f"create schema if not exists {schema}")
            con.execute(f"create table {schema}.raw_claims as select 'c1' as claim_id")
    return path


def test_a_relation_the_run_built_afterwards_is_found(tmp_path: Path) -> None:
    notes: list[str] = []
    assert built_after_read(ERROR, _warehouse(tmp_path, "raw"), notes) == "raw.raw_claims"
    assert notes == []


def test_a_relation_still_missing_or_elsewhere_is_not(tmp_path: Path) -> None:
    notes: list[str] = []
    assert built_after_read(ERROR, _warehouse(tmp_path, "staging"), notes) == ""  # not raw
    assert built_after_read(ERROR, None, notes) == ""
    assert built_after_read("Binder Error: column x not found", tmp_path / "x.duckdb", notes) == ""


def test_an_unqualified_name_is_not_judged(tmp_path: Path) -> None:
    # `from raw_claims` reads the default schema: a raw.raw_claims there now says nothing
    unqualified = "Catalog Error: Table with name raw_claims does not exist!\n"
    assert built_after_read(unqualified, _warehouse(tmp_path, "raw"), []) == ""
    read = unqualified + "\n  LINE 3: from raw_claims\n"
    assert built_after_read(read, tmp_path / "datavault.duckdb", []) == ""


def test_an_unreadable_warehouse_is_a_note(tmp_path: Path) -> None:
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"not a database at all" * 100)
    notes: list[str] = []
    assert built_after_read(ERROR, bad, notes) == ""
    assert notes and notes[0].startswith("could not look for raw_claims in the warehouse")


def _evidence(built: str) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="datavault", status="error",
        unit_id="test.datavault.source_not_null_raw_raw_claims_claim_id.2e749f6528",
        unit_path="models/staging/schema.yml", error_type="Runtime Error", error_message=ERROR,
        dbt=DbtInvocation(command="build", project_dir="/r", cwd="/r"),
    )  # fmt: skip
    evidence = Evidence(event=event, repo_root="/r", error=ERROR, built_in_run=built)
    evidence.index.sources = [("raw", "raw_claims")]
    evidence.index.seeds = ["raw_claims"]
    return evidence


def test_it_is_classified_as_the_environment_not_the_code() -> None:
    verdict = classify_failure(_evidence("raw.raw_claims"))
    assert (verdict.cls.value, verdict.signature) == (
        "env_mismatch", "relation_built_later")  # fmt: skip
    assert "raw.raw_claims" in verdict.reason and "a second build passes" in verdict.reason
    assert any("dbt seed" in a for a in verdict.next_actions)
    # not built by the run: the project's relation missing under that name is still code
    assert classify_failure(_evidence("")).signature == "catalog_error_project"

"""Classification that reads the change (issue 28, item 7): a name the breaking change wrote on
the failing line is code, whatever the warehouse lacks; a column read from outside the repo
whose type moved since the last good run is upstream drift (data), its type change named.

Error texts are DuckDB 2.0's and Postgres 15's own words (as dbt prints them)."""

from __future__ import annotations

from pathlib import Path

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.model import Evidence, ProjectIndex, TypeChange
from patchit.evidence.type_drift import data_file_type_changes
from patchit.evidence.yaml_marks import yaml_error_mark
from tests.classify.test_classifier import ORDERS, _evidence
from tests.conftest import commit_all, git

# A CTE `charge_details` read as `charge_detail` on the line the commit wrote: DuckDB's
# suggestion is a catalog table, not the CTE, so nothing in the text says "project".
DUCKDB_CTE = (
    "Runtime Error in model orders (models/marts/orders.sql)\n"
    "  Catalog Error: Table with name charge_detail does not exist!\n"
    '  Did you mean "pragma_database_list"?\n  \n  LINE 3: from charge_detail\n'
    "               ^^^^^^^^^^^^^"
)
PG_CTE = (
    "Database Error in model orders (models/marts/orders.sql)\n"
    '  relation "charge_detail" does not exist\n  LINE 12: from charge_detail\n'
    "               ^"
)
DIFF = (
    f"diff --git a/{ORDERS} b/{ORDERS}\n--- a/{ORDERS}\n+++ b/{ORDERS}\n"
    "@@ -9,4 +9,4 @@ with charge_details as (\n"
    " select\n     customer_id\n-from orders\n+from charge_detail\n"
)
# The same name on a line the change only moved: it did not introduce it.
MOVED = DIFF.replace("-from orders\n", "-from  charge_detail\n")
# Epoch seconds became timestamps: the package's `created * 1` no longer binds.
DUCKDB_TYPES = (
    "Runtime Error in model stg_stripe__charge "
    "(dbt_packages/stripe_source/models/stg_stripe__charge.sql)\n"
    "  Binder Error: No function matches the given name and argument types "
    "'*(TIMESTAMP, INTEGER_LITERAL)'. You might need to add explicit type casts."
)
PG_TYPES = (
    "Database Error in model stg_stripe__charge "
    "(dbt_packages/stripe_source/models/stg_stripe__charge.sql)\n"
    "  operator does not exist: timestamp without time zone * integer\n"
    "  HINT:  No operator matches the given name and argument types. You might need to add "
    "explicit type casts."
)
PACKAGE_MODEL = "dbt_packages/stripe_source/models/stg_stripe__charge.sql"
DRIFT = TypeChange(relation="stripe.charge", column="created", old="BIGINT", new="TIMESTAMP")


def _with_diff(message: str, diff: str) -> Evidence:
    evidence = _evidence(message, changed=(ORDERS,))
    evidence.breaking_diff = diff
    return evidence


def test_a_missing_name_the_change_wrote_is_code_not_environment() -> None:
    for message in (DUCKDB_CTE, PG_CTE):
        verdict = classify_failure(_with_diff(message, DIFF))
        assert (verdict.cls, verdict.signature) == (
            FailureClass.CODE_BUG,
            "catalog_error_changed_line",
        ), verdict.reason
        assert "charge_detail" in verdict.reason


def test_a_missing_name_the_change_did_not_write_stays_environment() -> None:
    for diff in ("", MOVED):
        verdict = classify_failure(_with_diff(DUCKDB_CTE, diff))
        assert (verdict.cls, verdict.signature) == (
            FailureClass.ENV_MISMATCH,
            "catalog_error_external",
        )


def _package_failure(message: str, changed: tuple[str, ...]) -> Evidence:
    evidence = _evidence(
        message,
        unit_id="model.stripe_source.stg_stripe__charge",
        unit_path=PACKAGE_MODEL,
        changed=changed,
    )
    evidence.type_changes = [DRIFT]
    return evidence


def test_a_source_column_whose_type_moved_is_upstream_drift() -> None:
    for message in (DUCKDB_TYPES, PG_TYPES):
        verdict = classify_failure(_package_failure(message, ("landing/stripe/charge.csv",)))
        assert (verdict.cls, verdict.signature) == (
            FailureClass.DATA_ISSUE,
            "upstream_type_drift",
        ), verdict.reason
        assert "stripe.charge.created BIGINT -> TIMESTAMP" in verdict.reason
        assert any("stripe.charge.created BIGINT -> TIMESTAMP" in a for a in verdict.next_actions)


def test_a_type_change_beside_a_change_of_the_sql_is_still_code() -> None:
    verdict = classify_failure(_package_failure(DUCKDB_TYPES, (PACKAGE_MODEL,)))
    assert verdict.cls is FailureClass.CODE_BUG


def test_the_type_change_is_read_from_the_data_files_at_both_commits(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    landing = repo / "landing" / "stripe"
    landing.mkdir(parents=True)
    git(repo, "init", "-q")
    (landing / "charge.csv").write_text("id,amount,created\nch_1,100,1759316400\n")
    (landing / "refund.csv").write_text("id,amount\nre_1,5\n")
    base = commit_all(repo, "good")
    (landing / "charge.csv").write_text("id,amount,created\nch_1,100,2025-10-01 11:00:00\n")
    (landing / "refund.csv").write_text("id,amount\nre_1,5\nre_2,7\n")  # rows, same types
    head = commit_all(repo, "new sync connector")
    evidence = _evidence(DUCKDB_TYPES, changed=("landing/stripe/charge.csv",
                                                "landing/stripe/refund.csv"))  # fmt: skip
    evidence.index = ProjectIndex(sources=[("stripe", "charge"), ("stripe", "refund")])
    notes: list[str] = []
    changes = data_file_type_changes(evidence, repo, base, head, notes)
    assert [c.describe() for c in changes] == [
        "stripe.charge (landing/stripe/charge.csv).created BIGINT -> TIMESTAMP"
    ], notes
    assert data_file_type_changes(evidence, repo, None, head, notes) == []
    evidence.index.seeds = ["charge"]  # a seed of the project's own: not upstream
    assert data_file_type_changes(evidence, repo, base, head, notes) == []


# dbt 1.11 on a description whose closing quote is lost: it names the line the scanner gave up
# on (the end of the file), not the line the scalar starts on.
UNTERMINATED = (
    'version: 2\n\nmodels:\n  - name: orders\n    description: "Orders, one row each\n'
    "    columns:\n      - name: order_id\n        data_tests:\n          - unique\n"
)
DBT_YAML = (
    "Parsing Error\n  Error reading shop: marts/schema.yml - Runtime Error\n"
    "    Syntax error near line 10\n    ------------------------------\n"
    "    Raw Error:\n    ------------------------------\n"
    "    while scanning a quoted scalar\n"
    '      in "<unicode string>", line 5, column 18\n'
    "    found unexpected end of stream\n"
    '      in "<unicode string>", line 10, column 1'
)


def test_a_yaml_error_is_located_where_the_parser_marks_it() -> None:
    mark = yaml_error_mark(UNTERMINATED)
    assert mark is not None and mark.line == 5, mark
    assert mark.describe("models/marts/schema.yml") == (
        "models/marts/schema.yml line 5 (while scanning a quoted scalar)"
    )
    assert yaml_error_mark("version: 2\nmodels: []\n") is None
    flow = yaml_error_mark('version: 2\nx:\n  values: ["card", "sepa, "paypal"]\n')
    assert flow is not None and flow.line == 3


def test_the_yaml_verdict_names_the_parsers_line_not_dbts(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "models" / "marts").mkdir(parents=True)
    (repo / "dbt_project.yml").write_text("name: shop\nprofile: shop\nmodel-paths: [models]\n")
    (repo / "models" / "marts" / "schema.yml").write_text(UNTERMINATED)
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.schema",
        unit_path="models/marts/schema.yml", status="parse_error", error_message=DBT_YAML,
    )  # fmt: skip
    evidence = gather_dbt_evidence(event, repo)
    assert evidence.yaml_error_at.startswith("models/marts/schema.yml line 5 ")
    verdict = classify_failure(evidence)
    assert verdict.signature == "yaml_invalid"
    assert "the YAML parser marks models/marts/schema.yml line 5" in verdict.reason

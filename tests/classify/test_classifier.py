"""Table-driven classification over messages captured from real dbt 1.11.16 / dbt-duckdb 1.11.1
runs on copies of patchit/examples/shop (each broken one way), plus common platform errors."""

from __future__ import annotations

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence, Relation
from patchit.evidence.project_index import index_project
from patchit.examples import SHOP

INDEX = index_project(SHOP)
ORDERS = "models/marts/orders.sql"
STG_ORDERS = "models/staging/stg_orders.sql"
STG_PAYMENTS = "models/staging/stg_payments.sql"

# Verbatim dbt output (run_results.json `message`, or the "Encountered an error" block).
BINDER = (
    "Runtime Error in model orders (models/marts/orders.sql)\n"
    '  Binder Error: Values list "o" does not have a column named "statsu"\n  \n'
    "  LINE 14:     o.statsu,\n               ^^^^^^^^"
)
NOT_NULL = "Got 1 result, configured to fail if != 0"
NO_PROFILE = "Runtime Error\n  Could not find profile named 'shopx'"
NO_ENV = "Parsing Error\n  Env var required but not provided: 'SHOP_DB_PATH'"
NO_TARGET = (
    "Runtime Error\n  The profile 'shop' does not have a target named 'prod'. "
    "The valid target names for this profile are:\n - dev"
)
LOCK = (
    'IO Error: Could not set lock on file "/tmp/cap/lock/shop.duckdb": Conflicting lock is held '
    "in /usr/bin/python3.11 (PID 6610). See also https://duckdb.org/docs/current/connect/concurrency"
)
UNDEFINED = (
    "Compilation Error in model stg_payments (models/staging/stg_payments.sql)\n"
    "  '{name}' is undefined. This can happen when calling a macro that does not exist. "
    'Check for typos and/or install package dependencies with "dbt deps".'
)
MISSING_NODE = (
    "Compilation Error\n  Model 'model.shop.orders' (models/marts/orders.sql) depends on a node "
    "named 'stg_order' which was not found"
)
CYCLE = "Found a cycle: model.shop.orders --> model.shop.order_payments"
PARSER = (
    "Runtime Error in model daily_revenue (models/marts/daily_revenue.sql)\n"
    '  Parser Error: syntax error at or near "selec"\n  LINE 10:       selec'
)
CONVERSION = (
    "Runtime Error in model orders (models/marts/orders.sql)\n  Conversion Error: Could not "
    "convert string 'completed' to INT32 when casting from source column status"
)
PACKAGES = (
    "Compilation Error\n  dbt found 1 package(s) specified in packages.yml, but only 0 package(s) "
    'installed in dbt_packages. Run "dbt deps" to install package dependencies.'
)
YAML_SCHEMA = (
    "Parsing Error\n  Invalid models config given in models/marts/extra.yml @ models: "
    "{'name': 'daily_revenue'} - at path ['columns'][0]['data_tests']: 3 is not of type 'array'"
)
YAML_SYNTAX = (
    "Parsing Error\n  Error reading shop: marts/extra.yml - Runtime Error\n"
    "    Syntax error near line 5\n    did not find expected ',' or ']'"
)


def _evidence(
    message: str,
    *,
    unit_id: str = "model.shop.orders",
    unit_path: str | None = ORDERS,
    status: str = "error",
    error_type: str = "",
    changed: tuple[str, ...] = (),
    raw_code: str = "select 1",
    upstream: tuple[str, ...] = (),
) -> Evidence:
    event = UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="shop",
        unit_id=unit_id,
        unit_path=unit_path,
        status=status,
        error_type=error_type,
        error_message=message,
    )
    is_test = unit_id.startswith("test.")
    return Evidence(
        event=event,
        repo_root="/repo",
        project_dir=".",
        unit_path=unit_path,
        unit_name=unit_id.split(".")[2],
        raw_code=raw_code,
        error=message,
        changed_files=list(changed),
        index=INDEX,
        upstream=[Relation(name=n) for n in upstream],
        test_kind="not_null" if is_test else None,
        tested_model="stg_orders" if is_test else None,
        tested_model_path=STG_ORDERS if is_test else None,
    )


NN_TEST = "test.shop.not_null_stg_orders_order_id.81cfe2fe64"
C = FailureClass
CASES: list[tuple[str, Evidence, FailureClass, str]] = [
    ("binder, changed", _evidence(BINDER, changed=(ORDERS,)), C.CODE_BUG, "sql_error"),
    ("binder, unchanged", _evidence(BINDER), C.CODE_BUG, "sql_error"),
    ("parser", _evidence(PARSER, changed=(ORDERS,)), C.CODE_BUG, "sql_error"),
    ("missing node", _evidence(MISSING_NODE, status="parse_error"), C.CODE_BUG, "missing_node"),
    ("cycle", _evidence(CYCLE, error_type="RuntimeError"), C.CODE_BUG, "cycle"),
    ("macro typo", _evidence(UNDEFINED.format(name="cents_to_dolars"), unit_path=STG_PAYMENTS),
     C.CODE_BUG, "undefined_macro_near_name"),
    ("macro nowhere", _evidence(UNDEFINED.format(name="frobnicate_all")), C.CODE_BUG,
     "undefined_macro"),
    ("package macro, not installed",
     _evidence(UNDEFINED.format(name="dbt_utils"), raw_code="{{ dbt_utils.safe_divide('a', 9) }}"),
     C.DEPENDENCY_ISSUE, "undefined_package_macro"),
    ("yaml schema", _evidence(YAML_SCHEMA, status="parse_error"), C.CODE_BUG, "yaml_invalid"),
    ("yaml syntax", _evidence(YAML_SYNTAX, status="parse_error"), C.CODE_BUG, "yaml_invalid"),
    ("catalog, project relation",
     _evidence("Catalog Error: Table with name stg_order does not exist!\nDid you mean "
               '"main.stg_orders"?'.replace("stg_order ", "stg_orders ")),
     C.CODE_BUG, "catalog_error_project"),
    ("catalog, foreign relation",
     _evidence("Catalog Error: Table with name erp_items does not exist!"),
     C.ENV_MISMATCH, "catalog_error_external"),
    ("not_null, sql unchanged", _evidence(NOT_NULL, unit_id=NN_TEST, status="fail",
     unit_path="models/staging/schema.yml", error_type="test_failure", changed=(ORDERS,)),
     C.DATA_ISSUE, "data_test_failed"),
    ("not_null, tested sql changed", _evidence(NOT_NULL, unit_id=NN_TEST, status="fail",
     unit_path="models/staging/schema.yml", changed=(STG_ORDERS,)),
     C.CODE_BUG, "data_test_code_changed"),
    ("not_null, only its yml changed", _evidence(NOT_NULL, unit_id=NN_TEST, status="fail",
     unit_path="models/staging/schema.yml", changed=("models/staging/schema.yml",)),
     C.DATA_ISSUE, "data_test_failed"),
    ("unique, no message", _evidence("", unit_id="test.shop.unique_orders_order_id.1",
     status="fail"), C.DATA_ISSUE, "data_test_failed"),
    ("missing profile", _evidence(NO_PROFILE, status="parse_error"), C.ENV_MISMATCH,
     "missing_profile"),
    ("missing env var", _evidence(NO_ENV, status="parse_error"), C.ENV_MISMATCH,
     "missing_env_var"),
    ("missing target", _evidence(NO_TARGET, status="parse_error"), C.ENV_MISMATCH,
     "missing_target"),
    ("missing profiles dir", _evidence("Runtime Error\n  Path '/root/.dbt' does not exist.",
     status="parse_error"), C.ENV_MISMATCH, "missing_profiles_dir"),
    ("lock", _evidence(LOCK, error_type="IOException"), C.INFRA_ISSUE, "database_lock"),
    ("refused", _evidence("Database Error\n  could not connect to server: Connection refused"),
     C.INFRA_ISSUE, "connection_failed"),
    ("dns", _evidence("could not translate host name \"db\": Temporary failure in name "
     "resolution"), C.INFRA_ISSUE, "dns_failure"),
    ("timeout", _evidence("Database Error\n  canceling statement due to statement timeout"),
     C.INFRA_ISSUE, "timeout"),
    ("permission", _evidence("IO Error: Cannot open file \"/data/shop.duckdb\": Permission denied"),
     C.INFRA_ISSUE, "permission_denied"),
    ("disk", _evidence("IO Error: No space left on device"), C.INFRA_ISSUE, "disk_full"),
    ("http 503", _evidence("HTTPError: 503 Server Error: Service Unavailable for url"),
     C.INFRA_ISSUE, "http_5xx"),
    ("no module", _evidence("No module named 'dbt.adapters.factory'"), C.DEPENDENCY_ISSUE,
     "module_missing"),
    ("adapter", _evidence("Runtime Error\n  Could not find adapter type duckdb!"),
     C.DEPENDENCY_ISSUE, "adapter_missing"),
    ("packages", _evidence(PACKAGES, status="parse_error"), C.DEPENDENCY_ISSUE,
     "packages_not_installed"),
    ("not compatible", _evidence("  - duckdb: 1.9.0 - Not compatible!"), C.DEPENDENCY_ISSUE,
     "version_incompatible"),
    ("catalog main", _evidence('Binder Error: Catalog "main" does not exist!'),
     C.DEPENDENCY_ISSUE, "duckdb_catalog_main"),
    ("conversion, unchanged", _evidence(CONVERSION), C.DATA_ISSUE, "conversion_data"),
    ("conversion, upstream changed", _evidence(CONVERSION, changed=(STG_ORDERS,),
     upstream=("stg_orders", "order_payments")), C.CODE_BUG, "conversion_code_changed"),
    ("unit test", _evidence("actual differs from expected:\n\n@@ ,order_id\n+++,2\n---,3",
     unit_id="unit_test.shop.orders.test_amounts", status="fail"), C.CODE_BUG, "unit_test_failed"),
    ("nothing known", _evidence("Runtime Error\n  something odd happened"), C.UNKNOWN, "none"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("evidence", "cls", "signature"),
    [pytest.param(ev, cls, sig, id=name) for name, ev, cls, sig in CASES],
)
def test_signature_and_class(evidence: Evidence, cls: FailureClass, signature: str) -> None:
    verdict = classify_failure(evidence)
    assert (verdict.cls, verdict.signature) == (cls, signature), verdict.reason
    assert verdict.reason.endswith(".") and "\n" not in verdict.reason
    assert "{" not in verdict.reason.replace("{'", "")
    assert verdict.next_actions


def test_reason_cites_the_error_and_whether_the_file_changed() -> None:
    changed = classify_failure(_evidence(BINDER, changed=(ORDERS,)))
    assert 'Values list "o" does not have a column named "statsu"' in changed.reason
    assert f"{ORDERS} changed since HEAD~1" in changed.reason
    assert "upstream" not in changed.reason

    unchanged = classify_failure(_evidence(BINDER))
    assert f"{ORDERS} did not change since HEAD~1" in unchanged.reason
    assert "upstream change" in unchanged.reason and "fix belongs in this repo" in unchanged.reason


def test_a_repositorys_first_commit_is_not_measured_from_its_parent() -> None:
    first = _evidence(BINDER, changed=(ORDERS,))
    first.event.commit = "0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6"
    reason = classify_failure(first).reason  # no parent, no last good: git said so
    assert f"{ORDERS} came with 0f1e2d3c4b5a, the repository's first commit" in reason
    assert "~1" not in reason
    first.change_base = "a" * 40  # a commit before it: measured from there, as before
    assert f"{ORDERS} changed since aaaaaaaaaaaa" in classify_failure(first).reason


def test_next_actions_are_concrete_commands() -> None:
    data = classify_failure(_evidence(NOT_NULL, unit_id=NN_TEST, status="fail"))
    assert "dbt test --select stg_orders --store-failures" in data.next_actions
    pkg = classify_failure(_evidence(PACKAGES))
    assert pkg.next_actions[0] == "dbt deps --project-dir ."
    typo = classify_failure(_evidence(UNDEFINED.format(name="cents_to_dolars")))
    assert "cents_to_dollars" in typo.next_actions[0]
    env = classify_failure(_evidence(NO_ENV))
    assert (
        env.next_actions[0]
        == "export SHOP_DB_PATH in the runtime (scheduler, CI secrets, .env loader)"
    )


def test_log_excerpt_is_consulted_when_the_message_says_nothing() -> None:
    ev = _evidence("")
    ev.event.log_excerpt = "12:00:01  Encountered an error:\n" + LOCK
    assert classify_failure(ev).cls is FailureClass.INFRA_ISSUE

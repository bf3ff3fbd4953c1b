"""Real dbt-postgres against a throw-away PostgreSQL 15 cluster (tests/pg_cluster.py): its
errors become events the way the wrapper makes them, are classified, and reach the column
fix-it; and `patchit dbt -- build` on a Postgres target verifies the fix in a sandbox schema,
or refuses a build that would leave it, with the user's schema untouched.

The user's relations are written with SQL, not built by dbt: one dbt run per test."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.examples import SHOP
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.columns import RenameColumnStrategy
from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import commit_all, git, user_dbt_events
from tests.pg_cluster import (
    PgCluster,
    heal_fixed,
    sandbox_databases,
    sandbox_schemas,
    schema_state,
    shop_on_postgres,
)

pytestmark = pytest.mark.slow

DAILY = "models/marts/daily_revenue.sql"
_SCHEMAS = itertools.count()
# Extra models, each broken one way, all reading the user's `orders` table.
BROKEN_MODELS = {
    "pg_relation": "select order_id from {{ target.schema }}.ordrs",
    "pg_function": "select summ(amount) as total from {{ ref('orders') }}",
    "pg_syntax": "select order_date, count(*) as n from {{ ref('orders') }} group order_date",
    "pg_qualified": "select o.stauts from {{ ref('orders') }} as o",
}


def _user_schema(pg: PgCluster) -> str:
    """A schema holding what the user's earlier green build left: orders with amounts."""
    schema = f"analytics_{next(_SCHEMAS)}"
    pg.execute(
        f"create schema {schema};"
        f"create table {schema}.orders as select g as order_id, g % 3 as customer_id,"
        f" date '2024-01-01' + g % 5 as order_date,"
        f" case when g % 4 = 0 then 'returned' else 'completed' end as status,"
        f" (g * 7 % 50)::numeric(10, 2) as amount from generate_series(1, 40) as g;"
        f"create table {schema}.customers as select g as customer_id from generate_series(0, 2) g"
    )
    return schema


def _repo(
    tmp_path: Path,
    pg: PgCluster,
    schema: str,
    extra: dict[str, str],
    green: bool = False,
    source: Path = SHOP,
) -> Path:
    """The shop project (or `source`) on Postgres in a git repo: one good commit (with
    `green`, built by dbt into `schema` as the user's last good run), then daily_revenue reads
    `amont` (and the extra models are added)."""
    repo = shop_on_postgres(tmp_path, pg, schema, source, green)
    daily = repo / DAILY
    daily.write_text(daily.read_text().replace("sum(amount) as revenue", "sum(amont) as revenue"))
    for name, sql in extra.items():
        (repo / "models" / "marts" / f"{name}.sql").write_text(sql + "\n")
    commit_all(repo, "daily_revenue: revenue per day")
    return repo


def test_real_postgres_errors_are_classified_and_the_hint_gives_the_rename(
    pg: PgCluster, tmp_path: Path
) -> None:
    repo = _repo(tmp_path, pg, _user_schema(pg), BROKEN_MODELS)
    select = ["daily_revenue", *BROKEN_MODELS]
    code, events = user_dbt_events(repo, ["run", "--select", *select])
    assert code == 1
    by_unit = {e.unit_id.rpartition(".")[2]: e for e in events}
    assert set(by_unit) == set(select)
    verdicts = {}
    for name, event in by_unit.items():
        assert event.error_type == "Database Error", event.error_message
        evidence = gather_dbt_evidence(event, repo)
        verdicts[name] = (evidence, classify_failure(evidence))

    said = {n: (v.cls, v.signature) for n, (_, v) in verdicts.items()}
    code_bug = FailureClass.CODE_BUG
    assert said == {
        "daily_revenue": (code_bug, "sql_error"),
        "pg_relation": (code_bug, "catalog_error_project"),
        "pg_function": (code_bug, "sql_error"),
        "pg_syntax": (code_bug, "sql_error"),
        "pg_qualified": (code_bug, "sql_error"),
    }
    evidence, verdict = verdicts["daily_revenue"]
    assert 'HINT:  Perhaps you meant to reference the column "orders.amount".' in evidence.error
    assert '(column "amont" does not exist)' in verdict.reason
    [candidate] = RenameColumnStrategy().fix(evidence, [])
    assert candidate.strategy == "duckdb_rename_column"
    apply_edits(repo, candidate.edits)
    assert "sum(amount) as revenue" in (repo / DAILY).read_text()
    [qualified] = RenameColumnStrategy().fix(verdicts["pg_qualified"][0], [])
    assert "o.status" in qualified.edits[0].replace


@pytest.mark.parametrize("clone", ["auto", "never", "busy"])
def test_patchit_dbt_on_postgres_verifies_the_fix_in_a_sandbox_schema(
    pg: PgCluster, tmp_path: Path, clone: str, _patchit_home: Path
) -> None:
    """In patchit's own copy of the user's database (`auto`), or, with `pg_clone = "never"`
    or another session on the user's database (`busy`), in a schema of the user's."""
    schema = f"analytics_{next(_SCHEMAS)}"
    repo = _repo(tmp_path, pg, schema, {}, green=True)
    if clone == "never":
        _patchit_home.mkdir(parents=True, exist_ok=True)  # the operator's setting
        (_patchit_home / "patchit.toml").write_text('[sandbox]\npg_clone = "never"\n')
    before = schema_state(pg, schema)
    others, databases = sandbox_schemas(pg), sandbox_databases(pg)  # other tests' on it
    busy = pg.connect() if clone == "busy" else None
    try:
        res = patchit_dbt(repo, "build", "--select", "daily_revenue")
    finally:
        if busy is not None:
            busy.close()
    assert res.returncode == 1, res.stderr  # dbt's own exit code
    assert 'column "amont" does not exist' in res.stdout
    assert "Traceback" not in res.stderr
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    assert incident["classification"] == "code_bug"
    branch = incident["branch"]
    assert branch == f"patchit/{incident['id']}"
    fixed = git(repo, "show", f"{branch}:{DAILY}")
    assert "sum(amount) as revenue" in fixed
    assert "data check: same as baseline" in res.stderr
    report = Path(incident["report_md"]).read_text()
    if clone == "auto":
        assert re.search(
            r"; Postgres: built in schema patchit_[0-9a-f]{12} of patchit_db_"
            r"[0-9a-f]{12}, patchit's copy of database postgres made ",
            report,
        )
        assert "upstream read from the copy (--defer)" in report
    else:
        assert "; Postgres: built in schema patchit_" in report
        assert "upstream read live from the user's relations (--defer)" in report
        busy_why = "1 other session(s) or prepared transaction(s) are on database postgres"
        why = '[sandbox] pg_clone = "never"' if clone == "never" else busy_why
        assert f"no copy of the database: {why}" in report
    # The user's schema, its relations, rows and checksums: untouched; no sandbox left behind
    assert schema_state(pg, schema) == before
    assert sandbox_schemas(pg) == others
    assert sandbox_databases(pg) == databases
    assert git(repo, "status", "--porcelain") == ""


CUSTOM_SCHEMA_AS_IS = """\
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}{{ target.schema }}
    {%- else -%}{{ custom_schema_name | trim }}{%- endif -%}
{%- endmacro %}
"""


def test_a_build_that_would_leave_the_sandbox_schema_is_refused(
    pg: PgCluster, tmp_path: Path
) -> None:
    """A project whose generate_schema_name takes a custom schema as is would build marts into
    the user's own `marts_<n>` schema from any target: patchit refuses to build at all."""
    schema, marts = f"analytics_{next(_SCHEMAS)}", f"marts_{next(_SCHEMAS)}"
    repo = tmp_path / "shop"
    shutil.copytree(SHOP, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (repo / "macros" / "schemas.sql").write_text(CUSTOM_SCHEMA_AS_IS)
    project = repo / "dbt_project.yml"
    project.write_text(project.read_text().replace(
        "      +materialized: table", f"      +materialized: table\n      +schema: {marts}"
    ))  # fmt: skip
    tmp = tmp_path / "again"
    tmp.mkdir()
    shutil.move(repo, tmp / "shop")
    repo = _repo(tmp_path, pg, schema, {}, green=True, source=tmp / "shop")
    user = {name: schema_state(pg, name) for name in (schema, marts)}
    others = sandbox_schemas(pg)  # other tests' on this session's cluster
    assert [r for r, _ in user[marts]["relations"]] == [  # type: ignore[index]
        "customer_segments", "customers", "daily_revenue", "order_payments", "orders",
    ]  # fmt: skip
    res = patchit_dbt(repo, "build", "--select", "daily_revenue")
    assert res.returncode == 1, res.stderr
    assert f"would be built into schema '{marts}', outside patchit's sandbox schema" in (
        res.stderr
    ), res.stderr
    [incident] = incidents()
    assert incident["status"] == "failed" and incident["branch"] is None
    assert {name: schema_state(pg, name) for name in (schema, marts)} == user
    assert sandbox_schemas(pg) == others


def test_patchit_dbt_on_postgres_fixes_a_function_name_end_to_end(
    pg: PgCluster, tmp_path: Path
) -> None:
    """`summ(numeric)` names no near function in Postgres's error: the fix-it reads the
    functions the target can call (`pg_proc`), and the fix is verified in a sandbox schema."""
    schema = f"analytics_{next(_SCHEMAS)}"
    repo = shop_on_postgres(tmp_path, pg, schema, SHOP, green=True)
    total = "models/marts/order_total.sql"
    (repo / total).write_text(BROKEN_MODELS["pg_function"] + "\n")
    commit_all(repo, "order_total: the sum of all orders")
    said = "function summ(numeric) does not exist"
    branch, report = heal_fixed(pg, repo, schema, "order_total", said)
    assert "select sum(amount) as total" in git(repo, "show", f"{branch}:{total}")
    assert "; Postgres: built in schema patchit_" in report

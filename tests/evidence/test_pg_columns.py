"""Upstream column evidence on a Postgres target, from the user's information_schema, against a
real PostgreSQL 15 (tests/pg_cluster.py) and real dbt-postgres runs.

The shop project is built green into the user's schema; then stg_customers renames
first_name to given_name while customers, which now reads stg_customers through a subquery,
still selects c.first_name: the upstream rename the corpus's `dbt_upstream_rename*`
scenarios break the same way. Postgres names the column it misses; the columns that say what
it became are in the warehouse, not in the artifacts (the schema.yml documents two columns).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.pg_columns import pg_upstream_columns
from patchit.evidence.run_order import built_after_read_pg
from patchit.examples import SHOP
from patchit.patching.fixits.columns import RenameColumnStrategy
from patchit.patching.llm.context import evidence_sections
from tests.conftest import commit_all, git, user_dbt_events
from tests.pg_cluster import PgCluster, shop_on_postgres

pytestmark = pytest.mark.slow

CUSTOMERS = "models/marts/customers.sql"
STG = "models/staging/stg_customers.sql"
RENAMED = ["customer_id", "given_name", "last_name", "email", "signup_date"]
_N = itertools.count()


def _renamed_upstream(tmp_path: Path, pg: PgCluster, schema: str) -> tuple[Path, Path]:
    """The shop project on Postgres, built green into `schema`; then the breaking commit."""
    repo = shop_on_postgres(tmp_path, pg, schema, SHOP, green=True)
    stg = repo / STG
    stg.write_text(stg.read_text().replace("    first_name,\n", "    first_name as given_name,\n"))
    customers = repo / CUSTOMERS
    customers.write_text(customers.read_text().replace(
        "from {{ ref('stg_customers') }} as c\n",
        "from (\n    select * from {{ ref('stg_customers') }} where customer_id is not null\n"
        ") as c\n",
    ))  # fmt: skip
    commit_all(repo, "stg_customers: given_name; customers: customers with an id only")
    return repo, repo / "profiles.yml"


def _failed_customers(repo: Path) -> UniversalFailureEvent:
    code, events = user_dbt_events(repo, ["build", "--select", "stg_customers", "customers"])
    assert code == 1
    [event] = [e for e in events if e.unit_id == "model.shop.customers"]
    assert "column c.first_name does not exist" in (event.error_message or "")
    return event


def test_postgres_upstream_columns_come_from_information_schema_and_fix_the_rename(
    pg: PgCluster, tmp_path: Path
) -> None:
    schema = f"analytics_ev_{next(_N)}"
    repo, profiles = _renamed_upstream(tmp_path, pg, schema)
    # Same-named relations elsewhere: another environment's schema, a patchit sandbox schema
    pg.execute(
        f"create schema {schema}_other; create table {schema}_other.stg_customers (nope int);"
        "create schema patchit_00000000e71d;"
        "create table patchit_00000000e71d.stg_customers (sandboxed int)"
    )
    event = _failed_customers(repo)

    evidence = gather_dbt_evidence(event, repo)

    by_name = {r.name: r for r in evidence.upstream}
    assert by_name["stg_customers"].relation == f"postgres.{schema}.stg_customers"
    assert by_name["stg_customers"].columns == RENAMED
    assert by_name["orders"].relation == f"postgres.{schema}.orders"
    assert "amount" in by_name["orders"].columns
    assert not [n for n in evidence.notes if "column" in n], evidence.notes
    # The fix-it reads the alias through the subquery to stg_customers, which now selects
    # first_name as given_name: the model keeps its first_name column.
    [candidate] = RenameColumnStrategy().fix(evidence, [])
    assert "c.given_name as first_name," in candidate.edits[0].replace
    assert "stg_customers, which now selects first_name as given_name" in candidate.rationale
    # The LLM's prompt gets the same columns
    [near] = [s for s in evidence_sections(evidence) if s.key == "neighbours"]
    [piece] = [p for p in near.pieces if p.label == "upstream stg_customers"]
    assert piece.text == f"postgres.{schema}.stg_customers: " + ", ".join(RENAMED)
    assert git(repo, "status", "--porcelain") == ""
    # Without a server to ask (the port refuses), no columns and a note, never a traceback
    text = profiles.read_text().replace(f"port: {pg.port}", "port: 1")
    profiles.write_text(text)
    offline = gather_dbt_evidence(event, repo)
    stg = {r.name: r for r in offline.upstream}["stg_customers"]
    assert stg.relation is None and "given_name" not in stg.columns
    [note] = [n for n in offline.notes if "Postgres target" in n]
    assert note.startswith("no upstream columns from the Postgres target: postgres 127.0.0.1:1/")
    assert "cannot connect for column evidence" in note


def test_a_relation_without_a_manifest_node_is_read_from_the_target_schema_only(
    pg: PgCluster,
) -> None:
    n = next(_N)
    target, other, lone = f"pgcols_t_{n}", f"pgcols_o_{n}", f"pgcols_l_{n}"
    pg.execute(
        f"create schema {target}; create schema {other}; create schema {lone};"
        f"create table {target}.orders (order_id int, amount numeric);"
        f"create table {other}.orders (nope int);"
        f"create view {lone}.payments as select 1 as payment_id, 'card' as method;"
        f"create table {other}.shared (a int); create table {lone}.shared (b int)"
    )
    notes: list[str] = []
    found = pg_upstream_columns(
        pg.profile(target),
        [("orders", {}, "orders"), ("payments", {}, "payments"), ("shared", {}, "shared"),
         ("absent", {}, "absent"), ("placed", {"schema": other}, "orders"),
         ("elsewhere", {"database": "another_db", "schema": target}, "orders")],
        notes,
    )  # fmt: skip
    assert found == {
        "orders": (f"postgres.{target}.orders", ["order_id", "amount"]),
        "payments": (f"postgres.{lone}.payments", ["payment_id", "method"]),
        "placed": (f"postgres.{other}.orders", ["nope"]),
    }  # `shared` is in two schemas, neither the target's: not guessed
    assert notes == []


def test_a_relation_missing_when_read_and_there_after_the_run_is_found(pg: PgCluster) -> None:
    # a source over a seed, read before the seed on a first build (evidence.run_order)
    n = next(_N)
    target, raw = f"pgrun_t_{n}", f"pgrun_raw_{n}"
    pg.execute(f"create schema {target}; create schema {raw};"
               f"create table {raw}.raw_claims (claim_id text)")  # fmt: skip
    error = f'Database Error in test x (models/s.yml)\n  relation "{raw}.raw_claims" does not exist'
    notes: list[str] = []
    assert built_after_read_pg(error, pg.profile(target), notes) == f"{raw}.raw_claims"
    still = error.replace("raw_claims", "raw_policies")
    assert built_after_read_pg(still, pg.profile(target), notes) == ""
    assert built_after_read_pg("column x does not exist", pg.profile(target), notes) == ""
    unqualified = 'relation "raw_claims" does not exist'  # which schema was meant: unknown
    assert built_after_read_pg(unqualified, pg.profile(target), notes) == ""
    assert notes == []

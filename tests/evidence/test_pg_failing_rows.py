"""A failing dbt data test's rows on a Postgres target, against a real PostgreSQL 15
(tests/pg_cluster.py) and real dbt-postgres runs: read on the user's database in a read-only
transaction, at most a few rows, stopped by a statement_timeout; the user's schema untouched.

The shop project is built green into the user's schema; then the user's data goes bad (an order
loses its id, a customer gets a segment the project does not accept) and `dbt test` fails.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.failing_rows import sample_failing_rows_pg
from patchit.examples import SHOP
from tests.conftest import user_dbt_events
from tests.pg_cluster import PgCluster, schema_state, shop_on_postgres

pytestmark = pytest.mark.slow

_N = itertools.count()


def _schema_state(pg: PgCluster, schema: str) -> dict[str, object]:
    """`schema_state`, and the sequences' values (a read that ran `nextval()` would show)."""
    state = schema_state(pg, schema)
    state["sequences"] = pg.execute(
        "select schemaname, sequencename, last_value from pg_sequences order by 1, 2"
    )
    return state


def test_a_failing_test_on_postgres_shows_its_rows_read_only(pg: PgCluster, tmp_path: Path) -> None:
    schema = f"analytics_rows_{next(_N)}"
    repo = shop_on_postgres(tmp_path, pg, schema, SHOP, green=True)
    pg.execute(
        f"update {schema}.orders set order_id = null where order_id in (101, 102);"
        f"update {schema}.customer_segments set segment = 'platinum' "
        "where customer_id = (select min(customer_id) from "
        f"{schema}.customer_segments)"
    )
    before = _schema_state(pg, schema)
    code, events = user_dbt_events(repo, ["test", "--select", "orders", "customer_segments"])
    assert code == 1
    by_test = {e.unit_id.split(".")[2].split("_")[0]: e for e in events}
    assert set(by_test) == {"not", "accepted"}, [e.unit_id for e in events]

    not_null = gather_dbt_evidence(by_test["not"], repo)
    assert not_null.tested_column == "order_id"
    # whole rows, the key columns first, the tested one NULL
    assert [list(r) for r in not_null.failing_rows] == [
        ["order_id", "customer_id", "order_date", "status", "amount", "card_amount"]
    ] * 2
    assert [r["order_id"] for r in not_null.failing_rows] == ["NULL", "NULL"]
    assert not [n for n in not_null.notes if "not sampled" in n], not_null.notes

    accepted = gather_dbt_evidence(by_test["accepted"], repo)
    assert [r.get("value_field") for r in accepted.failing_rows] == ["platinum"]
    assert not [n for n in accepted.notes if "not sampled" in n], accepted.notes

    assert _schema_state(pg, schema) == before


def test_the_sample_cannot_write_is_bounded_and_stops_a_slow_query(pg: PgCluster) -> None:
    schema = f"analytics_rows_{next(_N)}"
    pg.execute(
        f"create schema {schema}; create sequence {schema}.ids;"
        f"create table {schema}.big as select g as id from generate_series(1, 1000) g"
    )
    output = pg.profile(schema)
    before = _schema_state(pg, schema)

    rows, note = sample_failing_rows_pg(f"select * from {schema}.big", output, limit=3)
    assert note is None and len(rows) == 3

    rows, note = sample_failing_rows_pg(f"select nextval('{schema}.ids') as id", output)
    assert rows == [] and note is not None
    assert "read-only transaction" in note, note

    rows, note = sample_failing_rows_pg("select pg_sleep(30)", output, timeout_s=0.5)
    assert rows == [] and note is not None
    assert "statement timeout" in note, note

    # the server unreachable: a note, never an exception
    rows, note = sample_failing_rows_pg("select 1", {**output, "port": 1})
    assert rows == [] and note is not None and note.startswith("failing rows not sampled:")

    assert _schema_state(pg, schema) == before

"""The message fix-it on Postgres's "function ... does not exist", which names no near
function: the one near name among the functions the target's connection can call is the
candidate (a real PostgreSQL 15, tests/pg_cluster.py; the message as real dbt-postgres gives
it, see tests/classify/test_classify_postgres.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from patchit.evidence.pg_columns import pg_function_names
from patchit.examples import SHOP
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.message import FollowMessageStrategy
from tests.classify.test_classify_postgres import DAILY, FUNCTION
from tests.patching.scenarios import make_evidence
from tests.pg_cluster import PgCluster, shop_on_postgres

pytestmark = pytest.mark.slow  # a PostgreSQL server

_N = itertools.count()


def _broken(tmp_path: Path, pg: PgCluster, old: str, new: str) -> Path:
    repo = shop_on_postgres(tmp_path, pg, f"fn_{next(_N)}", SHOP, green=False)
    daily = repo / DAILY
    daily.write_text(daily.read_text().replace(old, new))
    return repo


def _fix(repo: Path, message: str) -> list[str]:
    evidence = make_evidence(
        repo, message, unit_id="model.shop.daily_revenue", unit_path=DAILY,
        error_type="Database Error",
    )  # fmt: skip
    texts = []
    for candidate in FollowMessageStrategy().fix(evidence, []):
        apply_edits(repo, candidate.edits)
        texts.append((repo / DAILY).read_text())
    return texts


def test_the_one_near_function_the_target_has_is_the_candidate(
    tmp_path: Path, pg: PgCluster
) -> None:
    repo = _broken(tmp_path, pg, "sum(amount) as revenue", "summ(amount) as revenue")
    [fixed] = _fix(repo, FUNCTION)
    assert "sum(amount) as revenue" in fixed and "summ(" not in fixed


def test_a_function_the_target_has_is_not_renamed(tmp_path: Path, pg: PgCluster) -> None:
    """`sum(text)`: the name exists, the argument types are what is wrong."""
    repo = _broken(tmp_path, pg, "sum(amount) as revenue", "sum(status) as revenue")
    assert _fix(repo, FUNCTION.replace("summ(numeric)", "sum(text)")) == []


def test_two_near_functions_give_no_candidate(tmp_path: Path, pg: PgCluster) -> None:
    pg.execute("create or replace function public.summa(numeric) returns numeric "
               "language sql as 'select $1'")  # fmt: skip
    try:
        repo = _broken(tmp_path, pg, "sum(amount) as revenue", "summ(amount) as revenue")
        assert _fix(repo, FUNCTION) == []  # `sum` and `summa` are both near `summ`
    finally:
        pg.execute("drop function public.summa(numeric)")


def test_only_the_functions_the_connection_can_call_unqualified(pg: PgCluster) -> None:
    pg.execute("create schema if not exists fn_hidden")
    pg.execute("create or replace function fn_hidden.revenue_of(numeric) returns numeric "
               "language sql as 'select $1'")  # fmt: skip
    names = pg_function_names(pg.profile("public"))
    assert names is not None
    assert {"sum", "date_trunc", "coalesce_fn_absent"} & names == {"sum", "date_trunc"}
    assert "revenue_of" not in names  # not on the search path: `revenue_of(x)` cannot call it
    unreachable = {**pg.profile("public"), "port": 1, "connect_timeout": 1}
    assert pg_function_names(unreachable) is None

"""An incremental model on a real Postgres (tests/pg_cluster.py): its sandbox build starts
from a copy of the user's table, so a failure of its incremental branch reproduces there and
the fix is proven on that branch, with the user's schema untouched.

The user's table holds a row its upstream no longer has (order 1000): only a copy of the table
has it, a build from scratch does not."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from patchit.examples import SHOP
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
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

LOG = "models/marts/order_log.sql"
ORDER_LOG = """\
{{ config(materialized='incremental', unique_key='order_id') }}
select order_id, order_date, amount from {{ ref('orders') }}
{% if is_incremental() %}
where order_id > (select coalesce(max(order_id), 0) from {{ this }})
{% endif %}
"""
BROKEN = ORDER_LOG.replace("max(order_id)", "max(order_idd)")


def _incremental_repo(tmp_path: Path, pg: PgCluster) -> tuple[Path, str]:
    """The shop on Postgres, built green with the incremental `order_log` (plus a row of the
    user's history), then `order_log`'s incremental branch broken and committed."""
    schema = f"incr_{uuid.uuid4().hex[:8]}"
    repo = shop_on_postgres(tmp_path, pg, schema, SHOP, green=True)
    (repo / LOG).write_text(ORDER_LOG)
    commit_all(repo, "order_log: orders as they come")
    code, events = user_dbt_events(repo, ["build", "--select", "order_log"])
    assert code == 0 and events == [], [e.error_message for e in events]
    pg.execute(f"insert into {schema}.order_log values (1000, date '2024-02-01', 5)")
    (repo / LOG).write_text(BROKEN)
    commit_all(repo, "order_log: the newest order")
    return repo, schema


def test_the_incremental_branch_fails_in_the_sandbox_as_it_did_for_the_user(
    pg: PgCluster, tmp_path: Path
) -> None:
    repo, schema = _incremental_repo(tmp_path, pg)
    code, [event] = user_dbt_events(repo, ["build", "--select", "order_log"])
    assert code == 1 and 'column "order_idd" does not exist' in event.error_message
    before, others = schema_state(pg, schema), sandbox_schemas(pg)
    databases = sandbox_databases(pg)
    home = worktrees_home()
    roots = []
    try:
        with DbtHarness(warm=False) as harness:
            verified = {}
            for kind, sql in (("broken", BROKEN), ("fixed", ORDER_LOG)):
                root = create_worktree(repo, "HEAD", home / f"incr-{kind}")
                roots.append(root)
                (root / LOG).write_text(sql)
                scratch = home.parent / "sandboxes" / "incr" / kind
                verified[kind] = harness.verify(Workspace(root=root, scratch=scratch), event)
            # patchit's copy of the database, made while the harness lives
            assert sandbox_databases(pg) != databases
        broken, fixed = verified["broken"], verified["fixed"]
        # from scratch, `max(order_idd)` is never compiled and the broken model passes
        assert not broken.passed and 'column "order_idd" does not exist' in broken.output
        copied = f"order_log built on a copy of {schema}.order_log (11 rows)"
        assert copied in broken.isolation and copied in fixed.isolation
        assert "patchit's copy of database postgres" in fixed.isolation
        assert fixed.passed, fixed.output
        assert "incremental" in fixed.output
    finally:
        for root in roots:
            remove_worktree(repo, root)
    assert schema_state(pg, schema) == before
    assert sandbox_schemas(pg) == others
    assert sandbox_databases(pg) == databases


def test_patchit_dbt_fixes_an_incremental_branch_on_a_copy_of_the_users_table(
    pg: PgCluster, tmp_path: Path
) -> None:
    repo, schema = _incremental_repo(tmp_path, pg)
    branch, report = heal_fixed(pg, repo, schema, "order_log", 'column "order_idd" does not exist')
    assert "max(order_id)" in git(repo, "show", f"{branch}:{LOG}")
    assert f"order_log built on a copy of {schema}.order_log (11 rows)" in report

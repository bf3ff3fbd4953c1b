"""The loop with the column fix-it, partial revert beside it, and the real dbt harness: staging
renames a column that a mart still reads through a CTE. DuckDB lists no candidates; the alias
resolves in the compiled SQL to stg_customers, which now selects `first_name as given_name`,
and the landed branch reads `c.given_name as first_name`: the mart keeps its column and the
staging rename stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.fixits.columns import RenameColumnStrategy
from patchit.patching.revert import PartialRevertStrategy
from patchit.sandbox.git import head_commit
from tests.conftest import commit_all, git, user_dbt_events

pytestmark = pytest.mark.slow

CUSTOMERS = "models/marts/customers.sql"
STAGING = "models/staging/stg_customers.sql"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_an_upstream_rename_lands_read_under_the_old_name(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)  # where the user runs dbt: the profile's relative DuckDB path
    _edit(shop_repo / CUSTOMERS, "with customer_orders as (", (
        "with c as (\n    select * from {{ ref('stg_customers') }}\n),\n\ncustomer_orders as ("
    ))  # fmt: skip
    _edit(shop_repo / CUSTOMERS, "from {{ ref('stg_customers') }} as c\n", "from c\n")
    commit_all(shop_repo, "customers: read staging through a CTE")
    good = head_commit(shop_repo)
    _edit(shop_repo / STAGING, "    first_name,\n", "    first_name as given_name,\n")
    commit_all(shop_repo, "stg_customers: given_name")
    code, events = user_dbt_events(shop_repo, ["build"])
    assert code == 1
    [event] = [e for e in events if e.unit_id == "model.shop.customers"]
    assert 'Values list "c" does not have a column named "first_name"' in event.error_message
    assert "Candidate" not in event.error_message
    before = git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)

    ctx = Context(
        home=_patchit_home,
        memory=Memory.open(_patchit_home),
        config=PatchitConfig(),
        strategies=[RenameColumnStrategy(), PartialRevertStrategy()],
        harnesses=[DbtHarness(timeout_s=300)],
    )
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    incident = outcome.incident
    attempts = ctx.memory.attempts_for(incident.id)
    assert incident.status == "fixed", [a.verification_output[-800:] for a in attempts]
    assert [(a.strategy, a.outcome) for a in attempts] == [("duckdb_rename_column", "verified")]
    landed = git(shop_repo, "show", f"{incident.branch}:{CUSTOMERS}")
    assert "    c.given_name as first_name,\n" in landed
    assert "first_name as given_name" in git(shop_repo, "show", f"{incident.branch}:{STAGING}")
    changed = git(shop_repo, "diff", "--name-only", f"{incident.branch}~1", incident.branch)
    assert changed.split() == [CUSTOMERS]
    assert git(shop_repo, "rev-parse", f"{incident.branch}~1").strip() != good
    assert (git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)) == before

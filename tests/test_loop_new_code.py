"""The loop with the comma fix-it, partial revert beside it, and the real dbt harness: a mart
gains a column appended without the comma on the line above. The landed branch adds the comma
and keeps the new column (a revert would drop it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.context import Context
from patchit.loop.loop import heal
from patchit.memory import Memory
from patchit.patching.fixits.missing_comma import MissingCommaStrategy
from patchit.patching.revert import PartialRevertStrategy
from patchit.sandbox.git import head_commit
from tests.conftest import commit_all, git, user_dbt_events

pytestmark = pytest.mark.slow

MART = "models/marts/daily_revenue.sql"


def test_a_new_column_missing_its_comma_lands_with_the_comma(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)  # where the user runs dbt: the profile's relative DuckDB path
    text = (shop_repo / MART).read_text()
    new = "    sum(amount) as revenue\n    count(distinct customer_id) as customers\n"
    (shop_repo / MART).write_text(text.replace("    sum(amount) as revenue\n", new))
    commit_all(shop_repo, "daily_revenue: customers per day")
    code, events = user_dbt_events(shop_repo, ["build"])
    assert code == 1
    [event] = [e for e in events if e.unit_id == "model.shop.daily_revenue"]
    assert 'syntax error at or near "count"' in event.error_message
    before = git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)

    ctx = Context(
        home=_patchit_home,
        memory=Memory.open(_patchit_home),
        config=PatchitConfig(),
        strategies=[MissingCommaStrategy(), PartialRevertStrategy()],
        harnesses=[DbtHarness(timeout_s=300)],
    )
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    incident = outcome.incident
    attempts = ctx.memory.attempts_for(incident.id)
    assert incident.status == "fixed", [a.verification_output[-1500:] for a in attempts]
    assert [(a.strategy, a.outcome) for a in attempts] == [("sql_add_missing_comma", "verified")]
    landed = git(shop_repo, "show", f"{incident.branch}:{MART}")
    assert "    sum(amount) as revenue,\n    count(distinct customer_id) as customers\n" in landed
    assert (git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)) == before

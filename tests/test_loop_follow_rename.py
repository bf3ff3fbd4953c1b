"""The loop with the forward fix-its, the single-column fix-it and partial revert beside them,
and the real dbt harness: staging renames `status` to `order_status`, which two marts and a
YAML test still read. One incident, one candidate that keeps the rename and follows it to
every consumer; the data check passes (each mart's outputs are the good commit's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.context import Context
from patchit.loop.loop import group_by_change, heal_group
from patchit.memory import Memory
from patchit.patching.fixits.columns import RenameColumnStrategy
from patchit.patching.fixits.follow_rename import FollowColumnRenameStrategy
from patchit.patching.revert import PartialRevertStrategy
from patchit.sandbox.git import head_commit
from tests.conftest import commit_all, git, user_dbt_events

pytestmark = pytest.mark.slow

STAGING = "models/staging/stg_orders.sql"
COUNTS = "models/marts/order_status_counts.sql"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_a_staging_rename_is_followed_to_every_consumer_in_one_candidate(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)  # where the user runs dbt: the profile's relative DuckDB path
    (shop_repo / COUNTS).write_text(
        "select\n    status,\n    count(*) as orders\nfrom {{ ref('stg_orders') }}\n"
        "group by status\n"
    )
    commit_all(shop_repo, "marts: orders per status")
    _edit(shop_repo / STAGING, "    status\n", "    status as order_status\n")
    commit_all(shop_repo, "stg_orders: call it order_status like the source system")
    code, events = user_dbt_events(shop_repo, ["build"])
    assert code == 1
    assert any('"status"' in e.error_message for e in events), [e.error_message for e in events]
    before = git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)

    ctx = Context(
        home=_patchit_home,
        memory=Memory.open(_patchit_home),
        config=PatchitConfig(),
        strategies=[FollowColumnRenameStrategy(), RenameColumnStrategy(), PartialRevertStrategy()],
        harnesses=[DbtHarness(timeout_s=300)],
    )
    try:
        [group] = group_by_change(events, ctx.memory)  # the YAML test failed; readers skipped
        outcome = heal_group(group.events, ctx, group.key)
    finally:
        ctx.close()
    incident = outcome.incident
    attempts = ctx.memory.attempts_for(incident.id)
    assert incident.status == "fixed", [a.verification_output[-1500:] for a in attempts]
    assert [(a.strategy, a.outcome) for a in attempts] == [
        ("dbt_follow_column_rename", "verified")
    ], [a.verification_output[-3000:] for a in attempts]
    show = lambda rel: git(shop_repo, "show", f"{incident.branch}:{rel}")  # noqa: E731
    assert "    status as order_status\n" in show(STAGING)  # the author's rename is kept
    assert "    o.order_status as status,\n" in show("models/marts/orders.sql")
    counts = show(COUNTS)
    assert "    order_status as status,\n" in counts and counts.endswith("group by order_status")
    assert "      - name: order_status\n" in show("models/staging/schema.yml")
    changed = git(shop_repo, "diff", "--name-only", f"{incident.branch}~1", incident.branch)
    assert sorted(changed.split()) == [
        COUNTS, "models/marts/orders.sql", "models/staging/schema.yml"
    ]  # fmt: skip
    assert (git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)) == before

"""The loop on issue 33's wrong fix, with real dbt: a commit joins an address table twice, for
the ship-to and the bill-to city, but the customers have no `bill_address_key` yet. DuckDB can
bind `ship_address_key`, one word away: the swap builds green, and the new `bill_city` column
has no baseline to differ from. A name the change wrote that is another word is the author's
to settle: the incident ends escalated (needs review), no branch, the alternatives named."""

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
ADDRESSES = "select i * 10 + 1 as address_key, 'City ' || i as city from range(1, 30) t(i)\n"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_a_bill_key_swapped_for_the_ship_key_ends_in_review_not_on_a_branch(
    shop_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(shop_repo)  # where the user runs dbt: the profile's relative DuckDB path
    (shop_repo / "models" / "staging" / "stg_addresses.sql").write_text(ADDRESSES)
    _edit(shop_repo / STAGING, "    email,\n", "    email,\n    id * 10 + 1 as ship_address_key,\n")
    _edit(shop_repo / CUSTOMERS, "    c.signup_date,\n", (
        "    c.signup_date,\n    ship_address.city as ship_city,\n"
        "    bill_address.city as bill_city,\n"
    ))  # fmt: skip
    _edit(shop_repo / CUSTOMERS, "left join customer_orders as co using (customer_id)\n", (
        "left join customer_orders as co using (customer_id)\n"
        "left join {{ ref('stg_addresses') }} as ship_address\n"
        "    on c.ship_address_key = ship_address.address_key\n"
        "left join {{ ref('stg_addresses') }} as bill_address\n"
        "    on c.bill_address_key = bill_address.address_key\n"
    ))  # fmt: skip
    commit_all(shop_repo, "customers: ship-to and bill-to cities")
    code, events = user_dbt_events(shop_repo, ["build"])
    assert code == 1
    [event] = [e for e in events if e.unit_id == "model.shop.customers"]
    assert 'does not have a column named "bill_address_key"' in event.error_message
    before = git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)
    branches = git(shop_repo, "branch", "--list")

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
    outputs = [a.verification_output[-1500:] for a in attempts]
    assert incident.status == "escalated", outputs
    assert incident.branch is None
    assert git(shop_repo, "branch", "--list") == branches
    swap = [a for a in attempts if a.strategy == "duckdb_rename_column"]
    assert [a.outcome for a in swap] == ["needs_review"], outputs
    (output,) = (a.verification_output for a in swap)
    # it built green; the review says why it is not taken, the data check what it cannot judge
    assert (
        "Needs review: `bill_address_key` is not a typo of `ship_address_key`: a different word "
        "(`bill` -> `ship`: opposites or siblings), on a line this change wrote "
        f"({CUSTOMERS}:"
    ) in output
    assert "a column `bill_address_key` the change may have meant to add" in output
    unjudged = output.split("the data check could not judge: ")[1].split(" are new")[0]
    assert unjudged.split(", ") == [
        "main.stg_customers.ship_address_key", "main.customers.ship_city",
        "main.customers.bill_city",
    ]  # fmt: skip
    assert not any(a.outcome == "verified" for a in attempts), outputs
    report = Path(str(ctx.memory.get_incident(incident.id).report_md)).read_text()
    assert "`bill_address_key` is not a typo of `ship_address_key`" in report
    assert (
        "could not judge: main.stg_customers.ship_address_key, main.customers.ship_city" in report
    )
    assert (git(shop_repo, "status", "--porcelain", "--ignored"), head_commit(shop_repo)) == before

"""A candidate held for review because it reverts the change, landed once the operator allows
it: `patchit dbt -- build` holds it, `patchit incidents` and the report say how to land it,
and `patchit heal ID` verifies it again and lands it. Real dbt-duckdb, real git, real SQLite,
the real CLI in subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt, user_state
from tests.conftest import commit_all, git

pytestmark = pytest.mark.slow

EXPOSURE = """\
version: 2

exposures:
  - name: payments_dashboard
    type: dashboard
    owner:
      name: Finance
      email: finance@example.com
    depends_on:
      - ref('stg_payments')
      - ref('order_payments')
"""
INLINE = (
    "from (\n    select order_id, payment_method,"
    " {{ cents_to_dollars('amount_cents') }} as amount\n"
    "    from {{ ref('raw_payments') }}\n) as payments"
)
LABEL = "reverts your change: deleted file models/staging/stg_payments.sql"


def drop_stg_payments(repo: Path) -> None:
    """order_payments reads raw_payments itself and stg_payments goes; an exposure the change
    forgot still names it, so only restoring the model (a revert of the deletion) passes."""
    (repo / "models/exposures.yml").write_text(EXPOSURE)
    commit_all(repo, "exposures: the payments dashboard")
    (repo / "models/staging/stg_payments.sql").unlink()
    marts = repo / "models/marts/order_payments.sql"
    marts.write_text(marts.read_text().replace("from {{ ref('stg_payments') }}", INLINE))
    schema = repo / "models/staging/schema.yml"
    text = schema.read_text()
    start = text.index("  - name: stg_payments\n")
    end = text.find("\n  - name:", start + 1)
    schema.write_text(text[:start] + (text[end + 1 :] if end >= 0 else ""))
    commit_all(repo, "order_payments reads raw_payments itself; drop stg_payments")


def test_a_held_revert_lands_after_the_operator_allows_it(
    shop_repo: Path, _patchit_home: Path
) -> None:
    drop_stg_payments(shop_repo)
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode != 0, res.stderr[-3000:]  # dbt's own code (2: a compile error)
    [row] = incidents()
    assert (row["status"], row["needs_review"], row["review_label"]) == ("escalated", True, LABEL)
    incident = row["id"]
    advice = (
        'set `[policy] revert = "allow"` in $PATCHIT_HOME/patchit.toml and run '
        f"`patchit heal {incident}`"
    )
    listed = patchit("incidents")
    assert listed.returncode == 0, listed.stderr
    assert f"held for review: {LABEL}" in " ".join(listed.stdout.split())
    assert advice in " ".join(listed.stdout.split())
    md = Path(row["report_md"]).read_text()
    assert advice in md, md[:3000]
    assert json.loads(Path(row["report_json"]).read_text())["reverts"] == LABEL
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    before = user_state(shop_repo)

    (_patchit_home / "patchit.toml").write_text('[policy]\nrevert = "allow"\n')
    healed = patchit("heal", incident)
    assert healed.returncode == 0, healed.stderr[-3000:]
    assert "verifying with the dbt harness" in healed.stderr  # verified again, not refused
    [row] = incidents()
    assert (row["status"], row["review_label"]) == ("fixed", None)
    branch = row["branch"]
    restored = git(shop_repo, "show", f"{branch}:models/staging/stg_payments.sql")
    assert "from {{ ref('raw_payments') }}" in restored
    # the rest of the change stays: order_payments still reads raw_payments itself
    assert INLINE in git(shop_repo, "show", f"{branch}:models/marts/order_payments.sql")
    assert user_state(shop_repo) == before  # the user's tree, HEAD and database untouched

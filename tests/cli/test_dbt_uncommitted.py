"""`patchit dbt -- build` on uncommitted work, end to end: real dbt-duckdb, real git, real SQLite.

The developer renames a column in a staging model (staged), adds a new mart that reads the new
name (untracked), and builds before committing; an older mart still reads the old name. The
heal follows the rename forward from a snapshot of the work, leaves the tree, the index and
the stash list byte for byte as they were, and `patchit apply` puts the fix in the tree (and
refuses once a file it touches was edited since)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt
from tests.conftest import commit_all, git, run_dbt

pytestmark = pytest.mark.slow

STAGING = "models/staging/stg_orders.sql"
COUNTS = "models/marts/order_status_counts.sql"
SHARE = "models/marts/order_status_share.sql"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def user_view(repo: Path) -> dict[str, bytes | str]:
    """What the heal must leave byte for byte: status, the index file, the stash list, HEAD
    and the checked-out branch."""
    return {
        "status": git(repo, "status", "--porcelain"),
        "index": (repo / ".git" / "index").read_bytes(),
        "stash": git(repo, "stash", "list"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "branch", "--show-current"),
    }


def rename_in_progress(repo: Path) -> None:
    (repo / COUNTS).write_text(
        "select\n    status,\n    count(*) as orders\nfrom {{ ref('stg_orders') }}\n"
        "group by status\n"
    )
    commit_all(repo, "marts: orders per status")
    git(repo, "stash", "list")
    _edit(repo / STAGING, "    status\n", "    status as order_status\n")
    git(repo, "add", STAGING)  # staged
    (repo / SHARE).write_text(  # untracked, written with the new name
        "select order_status, count(*) * 1.0 / sum(count(*)) over () as share\n"
        "from {{ ref('stg_orders') }}\ngroup by order_status\n"
    )


def test_uncommitted_rename_is_healed_forward_and_applied(shop_repo: Path) -> None:
    rename_in_progress(shop_repo)
    head = git(shop_repo, "rev-parse", "HEAD")
    before = user_view(shop_repo)
    assert "?? models/marts/order_status_share.sql" in str(before["status"])

    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1, res.stderr  # dbt's own exit code
    assert "healing uncommitted work on" in res.stderr
    assert user_view(shop_repo) == before  # status, index bytes, stash list, HEAD, branch
    [incident] = [i for i in incidents() if i["status"] == "fixed"] or incidents()
    assert incident["status"] == "fixed", res.stderr
    branch = incident["branch"]
    snapshot = incident["uncommitted"]["snapshot"]
    assert incident["uncommitted"]["base"] == head
    assert set(incident["uncommitted"]["files"]) == {STAGING, SHARE}
    # the branch is one commit on the snapshot, the snapshot one commit on HEAD
    assert git(shop_repo, "rev-parse", f"{branch}~1") == snapshot
    assert git(shop_repo, "rev-parse", f"{snapshot}~1") == head
    # the rename is followed forward, not reverted
    assert "status as order_status" in git(shop_repo, "show", f"{branch}:{STAGING}")
    counts = git(shop_repo, "show", f"{branch}:{COUNTS}")
    assert "order_status" in counts
    report = patchit("report", incident["id"]).stdout
    assert "uncommitted" in report.lower() and snapshot[:12] in report
    assert f"patchit apply {incident['id']}" in report

    # a file the fix touches edited since the heal: refused, nothing written
    fixed_files = git(shop_repo, "show", "--name-only", "--format=", branch).split()
    assert COUNTS in fixed_files
    counts_path = shop_repo / COUNTS
    original = counts_path.read_text()
    counts_path.write_text(original + "-- edited after the heal\n")
    stale = {p: (shop_repo / p).read_bytes() for p in fixed_files}
    index = (shop_repo / ".git" / "index").read_bytes()
    refused = patchit("apply", incident["id"].split("-")[1], cwd=shop_repo)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert COUNTS in refused.stderr and "changed since" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert {p: (shop_repo / p).read_bytes() for p in fixed_files} == stale
    assert (shop_repo / ".git" / "index").read_bytes() == index

    # as it was at the heal: applied to the working tree, then dbt builds green
    counts_path.write_text(original)
    applied = patchit("apply", incident["id"].split("-")[1], cwd=shop_repo)
    assert applied.returncode == 0, applied.stderr
    for path in fixed_files:
        assert (shop_repo / path).read_text() == git(shop_repo, "show", f"{branch}:{path}") + "\n"
    assert (shop_repo / ".git" / "index").read_bytes() == index  # the tree only
    assert git(shop_repo, "rev-parse", "HEAD") == head
    build = run_dbt(shop_repo, "build")
    assert build.returncode == 0, build.stdout[-3000:]
    # applied once: a second apply finds the files changed since the snapshot
    again = patchit("apply", incident["id"], cwd=shop_repo)
    assert again.returncode == 2 and "changed since" in again.stderr


def test_clean_checkout_heals_committed_code_as_before(shop_repo: Path) -> None:
    model = shop_repo / "models" / "marts" / "daily_revenue.sql"
    _edit(model, "sum(amount) as revenue", "sum(amout) as revenue")
    broken = commit_all(shop_repo, "daily_revenue: sum revenue per day")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1
    assert "uncommitted" not in res.stderr
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    assert incident["uncommitted"] is None
    assert git(shop_repo, "rev-parse", f"{incident['branch']}~1") == broken
    assert git(shop_repo, "status", "--porcelain") == ""

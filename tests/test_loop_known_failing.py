"""A node downstream of the incident that was already failing on this line (another breaking
change broke it; its fix waits on another branch) does not refuse a right fix: the dbt harness
sets it aside when it fails again, and says so. Real dbt (DuckDB), real git, real memory; the
judging itself is tested fast in tests/harnesses/test_known_failing.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import commit_all, git

pytestmark = pytest.mark.slow

EMAILS = "select customer_id, emial as email from {{ ref('stg_customers') }}\n"


def _report(incident: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(Path(incident["report_json"]).read_text())
    return report


def test_a_node_another_change_broke_does_not_refuse_this_changes_fix(
    shop_repo: Path, _patchit_home: Path
) -> None:
    assert patchit_dbt(shop_repo, "build").returncode == 0  # the last good run
    (shop_repo / "models" / "marts" / "customer_emails.sql").write_text(EMAILS)
    first = commit_all(shop_repo, "customer_emails: who to write to")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1, res.stderr[-3000:]
    [emails] = incidents()  # healed on its own branch, which nobody has merged yet
    assert _report(emails)["unit_id"] == "model.shop.customer_emails"
    stg = shop_repo / "models" / "staging" / "stg_customers.sql"
    stg.write_text(stg.read_text().replace("    first_name,", "    frist_name,"))
    commit_all(shop_repo, "stg_customers: tidy")
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 1, res.stderr[-3000:]
    [typo] = [i for i in incidents() if i["id"] != emails["id"]]
    report = _report(typo)
    assert report["unit_id"] == "model.shop.stg_customers"
    said = res.stdout + res.stderr
    assert typo["status"] == "fixed", said[-4000:]
    assert report["unit_verdicts"] == {"model.shop.stg_customers": "success"}
    verified = Path(typo["report_md"]).read_text()
    assert ("Set aside, failing on this line before this change and not edited by it: "
            "`model.shop.customer_emails`.") in verified, verified  # fmt: skip
    assert "set aside, failing on this line before this change" in said
    diff = git(shop_repo, "diff", "HEAD", typo["branch"])
    assert "+    first_name," in diff and "customer_emails" not in diff, diff
    assert git(shop_repo, "rev-parse", "HEAD") != first  # the user's line, untouched
    assert git(shop_repo, "status", "--porcelain") == ""

"""The whole delivery path on real dbt: failure -> verified branch -> `patchit pr` (a bare remote
and a local server speaking GitHub's pulls API) -> merge -> the next run is green -> `fixed`;
then a later commit brings the bug back and the fix reads `regression`, reopened. One heal on
one checkout for both (tests/delivery/test_track.py judges each outcome on a faked heal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt
from tests.cli.test_dbt_wrapper import break_column
from tests.conftest import commit_all, git
from tests.delivery.github_server import FakeGitHub, serve
from tests.delivery.test_pr import operator_settings

pytestmark = pytest.mark.slow
TOKEN = "ghp_" + "e" * 36


def test_failure_to_pull_request_to_merged_fix_then_its_regression(
    shop_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _patchit_home: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    with serve(FakeGitHub("acme/shop", remote, TOKEN)) as github:
        operator_settings(_patchit_home, github.url)
        git(shop_repo, "remote", "add", "origin", str(remote))
        git(shop_repo, "push", "-q", "origin", "main")
        break_column(shop_repo)
        assert patchit_dbt(shop_repo, "build").returncode == 1
        [incident] = incidents()
        assert incident["status"] == "fixed"
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        res = patchit("pr", incident["id"])
        assert res.returncode == 0, res.stderr
        assert github.pulls[1]["head"]["ref"] == incident["branch"]
        assert "sum(amount) as revenue" in github.pulls[1]["body"]
    assert patchit("track").stdout.count("pending") == 1  # not merged yet
    git(shop_repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #1", incident["branch"])
    green = patchit_dbt(shop_repo, "build")
    assert green.returncode == 0, green.stdout[-2000:]
    res = patchit("track")
    assert res.returncode == 0 and f"incident {incident['id']}: fixed" in res.stdout, res.stdout
    [after] = incidents()
    assert (after["status"], after["outcome"], after["pr_url"]) == (
        "fixed", "fixed", "https://github.example/acme/shop/pull/1",
    )  # fmt: skip
    # the fix does not hold: a later commit undoes the merge by hand, the next run fails again
    model = shop_repo / "models" / "marts" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("sum(amount) as revenue", "sum(amout) as revenue"))
    commit_all(shop_repo, "daily_revenue: back to amout")
    assert patchit_dbt(shop_repo, "build", extra=("--no-heal",)).returncode == 1
    res = patchit("track")
    assert f"incident {incident['id']}: regression" in res.stdout, res.stdout
    by_id = {i["id"]: i for i in incidents()}
    reopened = by_id.pop(incident["id"])
    # the failure of the new commit is a new breaking change: an incident of its own
    assert len(by_id) == 1
    assert (reopened["status"], reopened["outcome"], reopened["needs_human"]) == (
        "open", "regression", True,
    )  # fmt: skip
    assert incident["branch"] in reopened["summary"]

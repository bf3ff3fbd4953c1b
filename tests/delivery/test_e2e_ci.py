"""`patchit ci` end to end, as a pull request's GitHub Actions job runs it: real dbt (DuckDB),
real git with a bare remote holding the pull request's branches, a `pull_request` event
payload as GitHub writes it, and the local GitHub stand-in (reviews, issue comments, pulls,
statuses). The CLI runs in a subprocess with the job's environment variables.

- a one-line fix arrives as a suggestion on the right line, with one summary comment; a second
  run edits that comment; applying the suggestion makes the next run green;
- a fix across three files arrives as a pull request into the head branch;
- a fork's run pushes nothing, sends nothing and writes the step summary and the artifact.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.test_dbt_wrapper import break_column
from tests.conftest import commit_all, git
from tests.delivery.github_server import FakeGitHub, serve
from tests.delivery.test_ci_env import actions_env, pull_request_event

pytestmark = pytest.mark.slow
TOKEN = "ghs_" + "d" * 36
REVENUE = "models/marts/daily_revenue.sql"


@dataclass
class Job:
    repo: Path
    remote: Path
    github: FakeGitHub
    tmp: Path
    head_repo: str = "acme/shop"

    def open_pull(self, branch: str) -> None:
        git(self.repo, "push", "-q", "-f", "origin", branch)
        self.github.add_pull(7, branch, "main")

    def run(self, *dbt_args: str) -> subprocess.CompletedProcess[str]:
        pull = self.github.pulls[7]
        event = pull_request_event(
            7, (pull["head"]["ref"], pull["head"]["sha"]), ("main", pull["base"]["sha"]),
            head_repo=self.head_repo,
        )  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
        env.update(actions_env(self.tmp / "event.json", event))
        env.update(GITHUB_TOKEN=TOKEN, GITHUB_API_URL=self.github.url,
                   GITHUB_STEP_SUMMARY=str(self.tmp / "step-summary.md"),
                   RUNNER_TEMP=str(self.tmp / "runner-temp"))  # fmt: skip
        return subprocess.run(
            [sys.executable, "-m", "patchit", "ci", "--project-dir", str(self.repo), "--",
             *dbt_args, "--profiles-dir", str(self.repo)],
            cwd=self.repo, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip


@pytest.fixture
def job(shop_repo: Path, tmp_path: Path, _patchit_home: Path) -> Job:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(shop_repo, "remote", "add", "origin", str(remote))
    git(shop_repo, "push", "-q", "origin", "main")
    return Job(shop_repo, remote, FakeGitHub("acme/shop", remote, TOKEN), tmp_path)


def test_one_line_fix_is_a_suggestion_then_applied_the_next_run_is_green(job: Job) -> None:
    state = job.tmp / "prod-state"  # Slim CI: production's manifest, as a deploy job keeps it
    state.mkdir()
    shutil.copy(job.repo / "target" / "manifest.json", state / "manifest.json")
    slim = ("build", "--select", "state:modified+", "--state", str(state))
    git(job.repo, "switch", "-q", "-c", "feature/revenue")
    break_column(job.repo)
    with serve(job.github):
        job.open_pull("feature/revenue")
        before = (
            git(job.repo, "status", "--porcelain"),
            git(job.repo, "rev-parse", "HEAD"),
        )
        first = job.run(*slim)
        assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]  # dbt's
        [review] = job.github.reviews[7]
        [comment] = review["comments"]
        assert (comment["path"], comment["line"], comment["side"]) == (REVENUE, 4, "RIGHT")
        assert "```suggestion\n    sum(amount) as revenue\n```" in comment["body"]
        assert review["commit_id"] == job.github.pulls[7]["head"]["sha"]
        [summary] = job.github.comments.values()
        assert summary["body"].startswith("<!-- patchit:summary -->")
        assert (
            "dbt failed (exit 1)" in summary["body"] and "suggested in a review" in summary["body"]
        )
        assert [s["state"] for s in job.github.statuses] == ["failure"]
        assert "patchit/pr-7" not in git(job.remote, "branch", "--list")
        # dbt's own logs/ and target/ aside (ignored), the checkout is as it was
        assert (git(job.repo, "status", "--porcelain"),
                git(job.repo, "rev-parse", "HEAD")) == before  # fmt: skip

        second = job.run(*slim)
        assert second.returncode == 1
        assert list(job.github.comments) == [summary["id"]]  # edited in place, not a second
        assert len(job.github.reviews[7]) == 1  # the same suggestion is not made twice

        # the author applies the suggestion (GitHub commits the suggested lines on the head)
        model = job.repo / REVENUE
        lines = model.read_text().split("\n")
        lines[comment["line"] - 1] = "    sum(amount) as revenue"
        model.write_text("\n".join(lines))
        commit_all(job.repo, "Apply suggestions from code review")
        job.open_pull("feature/revenue")
        green = job.run(*slim)
        assert green.returncode == 0, green.stdout[-3000:]
        assert list(job.github.comments) == [summary["id"]]
        assert "dbt passed" in job.github.comments[summary["id"]]["body"]
        assert [s["state"] for s in job.github.statuses] == ["failure", "failure", "success"]
    assert all(TOKEN not in json.dumps(r["body"]) for r in job.github.requests)


def test_a_fix_across_files_is_a_pull_request_into_the_head_branch(job: Job) -> None:
    counts = "models/marts/order_status_counts.sql"
    (job.repo / counts).write_text(
        "select\n    status,\n    count(*) as orders\nfrom {{ ref('stg_orders') }}\n"
        "group by status\n"
    )
    commit_all(job.repo, "marts: orders per status")
    git(job.repo, "push", "-q", "origin", "main")
    git(job.repo, "switch", "-q", "-c", "feature/order-status")
    staging = job.repo / "models/staging/stg_orders.sql"
    staging.write_text(staging.read_text().replace("    status\n", "    status as order_status\n"))
    head = commit_all(job.repo, "stg_orders: call it order_status like the source system")
    with serve(job.github):
        job.open_pull("feature/order-status")
        res = job.run("build")
        assert res.returncode == 1, res.stdout[-3000:]
        opened = [p for n, p in job.github.pulls.items() if n != 7]
        assert len(opened) == 1, res.stdout[-3000:] + res.stderr[-2000:]
        assert (opened[0]["head"]["ref"], opened[0]["base"]["ref"]) == (
            "patchit/pr-7", "feature/order-status",
        )  # fmt: skip
        pushed = git(job.remote, "rev-parse", "patchit/pr-7")
        assert git(job.remote, "rev-parse", f"{pushed}~1") == head
        changed = git(job.remote, "diff", "--name-only", head, pushed).split()
        assert sorted(changed) == [counts, "models/marts/orders.sql", "models/staging/schema.yml"]
        assert not job.github.reviews.get(7)
        [summary] = job.github.comments.values()
        assert f"pull request #{opened[0]['number']} into `feature/order-status`" in summary["body"]


def test_a_fork_pushes_nothing_and_writes_the_step_summary(job: Job) -> None:
    git(job.repo, "switch", "-q", "-c", "feature/revenue")
    break_column(job.repo)
    job.head_repo = "mallory/shop"
    with serve(job.github):
        job.open_pull("feature/revenue")
        sent = len(job.github.requests)
        res = job.run("build")
        assert res.returncode == 1
        assert job.github.requests[sent:] == []
    assert sorted(git(job.remote, "branch", "--format=%(refname:short)").split()) == [
        "feature/revenue", "main",
    ]  # fmt: skip
    step = (job.tmp / "step-summary.md").read_text()
    assert "its token is read-only" in step and "+    sum(amount) as revenue" in step
    artifact = job.tmp / "runner-temp" / "patchit"
    assert (artifact / "patchit-summary.md").is_file() and list((artifact / "reports").glob("*.md"))
    assert "read-only:" in res.stdout + res.stderr

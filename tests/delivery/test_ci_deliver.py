"""`patchit ci`'s delivery into the pull request, on real git (a bare remote, the pull request's
head and base pushed there) and the local GitHub stand-in, with fixed incidents made the way
the loop lands them (one commit on `patchit/<id>` over the failing commit). dbt is not run
here: tests/delivery/test_e2e_ci.py does the same end to end on real dbt."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from patchit.delivery.ci_deliver import deliver_in_pull_request
from patchit.delivery.ci_env import PullRequestJob
from patchit.delivery.suggestions import as_suggestions, fix_on_head, pull_request_lines
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.memory import Incident, Memory
from tests.conftest import commit_all, git
from tests.delivery.github_server import FakeGitHub, serve

TOKEN = "ghs_" + "c" * 36
MODEL = "models/daily_revenue.sql"
GOOD = "select\n    order_date,\n    sum(amount) as revenue\nfrom payments\ngroup by 1\n"


@dataclass
class Pr:
    repo: Path
    remote: Path
    github: FakeGitHub
    memory: Memory
    home: Path
    job: PullRequestJob
    merge_base: str
    said: list[str]


@pytest.fixture
def pr(tmp_path: Path, _patchit_home: Path) -> Iterator[Pr]:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("a", "b", "c"):
        (repo / f"models/{name}.sql").parent.mkdir(exist_ok=True)
        (repo / f"models/{name}.sql").write_text(f"select amount from {name}\n")
    (repo / MODEL).write_text(GOOD)
    merge_base = commit_all(repo, "shop")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    git(repo, "switch", "-q", "-c", "feature/revenue")
    (repo / MODEL).write_text(GOOD.replace("sum(amount)", "sum(amout)"))
    for name in ("a", "b", "c"):
        (repo / f"models/{name}.sql").write_text(f"select amout from {name}\n")
    head = commit_all(repo, "revenue: sum per day")
    git(repo, "push", "-q", "origin", "feature/revenue")
    github = FakeGitHub("acme/shop", remote, TOKEN)
    with serve(github), Memory.open(_patchit_home) as memory:
        github.add_pull(7, "feature/revenue", "main")
        job = PullRequestJob(
            repository="acme/shop", number=7, head_ref="feature/revenue", head_sha=head,
            head_repository="acme/shop", base_ref="main", base_sha=merge_base, sha=head,
            api_url=github.url, token=TOKEN, step_summary=tmp_path / "step-summary.md",
        )  # fmt: skip
        yield Pr(repo, remote, github, memory, _patchit_home, job, merge_base, [])


def fixed(pr: Pr, files: dict[str, str], unit: str = "model.shop.daily_revenue") -> Incident:
    """A fixed incident whose branch holds `files` (path -> text) over the head commit."""
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id=unit, repo_path=str(pr.repo),
        commit=pr.job.head_sha, error_type="Binder Error",
        error_message='Referenced column "amout" not found',
    )  # fmt: skip
    incident = pr.memory.create_incident(event, f"fp-{unit}", f"ck-{unit}")
    branch = f"patchit/{incident.id}"
    git(pr.repo, "switch", "-q", "-c", branch)
    for path, text in files.items():
        (pr.repo / path).write_text(text)
    commit_all(pr.repo, "patchit: amout -> amount")
    git(pr.repo, "switch", "-q", "feature/revenue")
    report = pr.home / "reports" / f"{incident.id}.md"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(f"# patchit incident {incident.id}\n\nverification: dbt passed\n")
    pr.memory.update_incident(incident.id, summary="a column typo: amout")
    return pr.memory.transition(incident.id, "fixed", branch=branch, report_md=str(report))


def run(pr: Pr, incidents: list[Incident], job: PullRequestJob | None = None) -> Path:
    return deliver_in_pull_request(
        job or pr.job, pr.repo, pr.merge_base, incidents, 1, pr.home, pr.home / "artifacts",
        pr.said.append,
    )  # fmt: skip


def test_a_one_line_fix_is_a_suggestion_on_its_line(pr: Pr) -> None:
    incident = fixed(pr, {MODEL: GOOD})
    before = git(pr.repo, "status", "--porcelain"), git(pr.repo, "rev-parse", "HEAD")
    summary = run(pr, [incident])
    [review] = pr.github.reviews[7]
    assert review["commit_id"] == pr.job.head_sha
    [comment] = review["comments"]
    assert (comment["path"], comment["line"], comment["side"]) == (MODEL, 3, "RIGHT")
    assert "start_line" not in comment
    assert comment["body"].endswith("```suggestion\n    sum(amount) as revenue\n```\n")
    [note] = pr.github.comments.values()
    assert note["body"].startswith("<!-- patchit:summary -->") and incident.id in note["body"]
    assert "verification: dbt passed" in note["body"]  # the incident's report
    [status] = pr.github.statuses
    assert (status["sha"], status["context"], status["state"]) == (
        pr.job.head_sha, "patchit", "failure",
    )  # fmt: skip
    assert summary.read_text() == note["body"]
    assert (git(pr.repo, "status", "--porcelain"), git(pr.repo, "rev-parse", "HEAD")) == before
    assert "patchit/pr-7" not in git(pr.remote, "branch", "--list")  # nothing pushed
    assert all(TOKEN not in str(r["body"]) for r in pr.github.requests)


def test_a_second_run_edits_the_same_summary_and_suggests_once(pr: Pr) -> None:
    incident = fixed(pr, {MODEL: GOOD})
    run(pr, [incident])
    first = dict(pr.github.comments)
    run(pr, [incident])
    assert list(pr.github.comments) == list(first)  # edited in place, never a second one
    assert len(pr.github.reviews[7]) == 1  # the same fix on the same commit: not again
    patches = [r for r in pr.github.requests if r["method"] == "PATCH"]
    [comment_id] = first
    assert [r["path"] for r in patches] == [f"/repos/acme/shop/issues/comments/{comment_id}"]
    assert len(pr.github.statuses) == 2


def test_a_multi_file_fix_is_a_pull_request_into_the_head_branch(pr: Pr) -> None:
    files = {f"models/{n}.sql": f"select amount from {n}\n" for n in ("a", "b", "c")}
    incident = fixed(pr, {**files, MODEL: GOOD})
    run(pr, [incident])
    assert 7 not in pr.github.reviews or not pr.github.reviews[7]
    [opened] = [p for n, p in pr.github.pulls.items() if n != 7]
    assert (opened["head"]["ref"], opened["base"]["ref"]) == ("patchit/pr-7", "feature/revenue")
    pushed = git(pr.remote, "rev-parse", "patchit/pr-7")
    assert git(pr.remote, "rev-parse", f"{pushed}~1") == pr.job.head_sha
    assert git(pr.remote, "show", f"{pushed}:models/b.sql") == "select amount from b"
    [note] = pr.github.comments.values()
    assert f"pull request #{opened['number']} into `feature/revenue`" in note["body"]
    run(pr, [incident])  # again: the same branch and pull request, no second
    assert len(pr.github.pulls) == 2 and git(pr.remote, "rev-parse", "patchit/pr-7") == pushed


def test_a_fork_sends_nothing_and_writes_the_step_summary(pr: Pr) -> None:
    incident = fixed(pr, {MODEL: GOOD})
    fork = replace(pr.job, head_repository="mallory/shop")
    summary = run(pr, [incident], fork)
    assert pr.github.requests == []
    assert "patchit/" not in git(pr.remote, "branch", "--list")
    step = (pr.job.step_summary or Path()).read_text()
    assert "## patchit" in step and "+    sum(amount) as revenue" in step  # the fix, by hand
    assert "mallory/shop: its token is read-only" in step
    assert summary.is_file() and (summary.parent / "reports" / f"{incident.id}.md").is_file()
    assert any(line.startswith("read-only:") for line in pr.said)


def test_the_operators_api_url_wins_over_the_runners(pr: Pr, tmp_path: Path) -> None:
    incident = fixed(pr, {MODEL: GOOD})
    elsewhere = FakeGitHub("acme/shop", pr.remote, TOKEN)
    with serve(elsewhere):
        (pr.home / "patchit.toml").write_text(f'[delivery]\napi_url = "{pr.github.url}"\n')
        run(pr, [incident], replace(pr.job, api_url=elsewhere.url))
    assert elsewhere.requests == [] and pr.github.reviews[7]
    assert any("GITHUB_API_URL" in line and "ignored" in line for line in pr.said)


def test_another_repository_named_by_the_operator_gets_nothing(pr: Pr) -> None:
    incident = fixed(pr, {MODEL: GOOD})
    (pr.home / "patchit.toml").write_text('[delivery]\nrepo = "acme/other"\n')
    run(pr, [incident])
    assert pr.github.requests == []


def test_suggestions_land_on_the_head_when_verified_on_the_merge_commit(pr: Pr) -> None:
    """GitHub checks out a test merge commit: the fix, verified there, is carried onto the
    head commit and its suggestion sits on the head's line numbers."""
    git(pr.repo, "switch", "-q", "main")
    (pr.repo / "models/new.sql").write_text("select 1 as one\n")
    (pr.repo / MODEL).write_text("-- daily revenue\n" + GOOD)  # the base moved the lines
    commit_all(pr.repo, "main: a header")
    git(pr.repo, "switch", "-q", "--detach", "main")
    git(pr.repo, "merge", "-q", "--no-edit", pr.job.head_sha)
    merge = git(pr.repo, "rev-parse", "HEAD")
    (pr.repo / MODEL).write_text("-- daily revenue\n" + GOOD)
    fix = commit_all(pr.repo, "patchit: amout -> amount")
    on_head, left = fix_on_head(pr.repo, [fix], pr.job.head_sha, pr.home / "scratch")
    assert left == [] and on_head is not None and on_head != fix
    assert git(pr.repo, "rev-parse", f"{on_head}~1") == pr.job.head_sha
    assert git(pr.repo, "show", f"{on_head}:{MODEL}") == GOOD.strip()  # the head's file, fixed
    shown = pull_request_lines(pr.repo, pr.merge_base, pr.job.head_sha)
    [suggestion], why = as_suggestions(pr.repo, pr.job.head_sha, on_head, shown)
    assert why == "" and (suggestion.start_line, suggestion.line) == (3, 3)
    assert git(pr.repo, "rev-parse", "HEAD") == fix and merge  # the checkout stays where it was
    assert not (pr.home / "scratch").exists()


def test_lines_outside_the_pull_requests_diff_are_not_suggested(pr: Pr) -> None:
    shown = pull_request_lines(pr.repo, pr.merge_base, pr.job.head_sha)
    assert shown[MODEL] == set(range(1, 6))
    git(pr.repo, "switch", "-q", "-c", "far")
    (pr.repo / MODEL).write_text("\n" * 30 + GOOD.replace("sum(amount)", "sum(amout)") + "x\n")
    far_head = commit_all(pr.repo, "a long file")
    (pr.repo / MODEL).write_text("\n" * 30 + GOOD.replace("sum(amount)", "sum(amout)") + "y\n")
    fix = commit_all(pr.repo, "fix far below")
    found, why = as_suggestions(pr.repo, far_head, fix, {MODEL: {1, 2, 3}})
    assert found == [] and "not in the pull request's diff" in why


def test_an_insertion_keeps_its_anchor_line(pr: Pr) -> None:
    broken = GOOD.replace("sum(amount)", "sum(amout)")
    (pr.repo / MODEL).write_text(broken.replace("group by 1\n", "group by 1\nhaving 1 = 1\n"))
    fix = commit_all(pr.repo, "insert a line")
    shown = pull_request_lines(pr.repo, pr.merge_base, f"{fix}~1")
    [suggestion], why = as_suggestions(pr.repo, f"{fix}~1", fix, shown)
    assert why == "" and (suggestion.start_line, suggestion.line) == (5, 5)
    assert suggestion.lines == ("group by 1", "having 1 = 1")


def test_a_green_build_comments_nothing_new_but_edits_the_old_summary(pr: Pr) -> None:
    deliver_in_pull_request(pr.job, pr.repo, pr.merge_base, [], 0, pr.home, pr.home / "art",
                            pr.said.append)  # fmt: skip
    assert pr.github.comments == {}  # no comment on every pull request that builds
    assert [s["state"] for s in pr.github.statuses] == ["success"]
    incident = fixed(pr, {MODEL: GOOD})
    run(pr, [incident])
    deliver_in_pull_request(pr.job, pr.repo, pr.merge_base, [], 0, pr.home, pr.home / "art",
                            pr.said.append)  # fmt: skip
    [comment] = pr.github.comments.values()
    assert "dbt passed" in comment["body"] and incident.id not in comment["body"]
    assert [s["state"] for s in pr.github.statuses] == ["success", "failure", "success"]

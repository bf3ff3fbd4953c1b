"""`patchit pr`: push the fix branch to a real (bare) remote and open its pull request on a
local server that speaks GitHub's pulls API; idempotent, refused for anything unverified."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchit.delivery.deliver import DeliveryError, deliver
from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.memory import Memory
from patchit.patching.base import Edit, PatchCandidate
from patchit.policy.settings import project_key
from patchit.reports.model import RootCauseReport
from patchit.reports.render import write_report
from tests.cli.helpers import incidents, patchit
from tests.conftest import commit_all, git
from tests.delivery.github_server import FakeGitHub, serve
from tests.delivery.listener import listening

TOKEN = "ghp_" + "x" * 36


@dataclass
class Setup:
    repo: Path
    remote: Path
    memory: Memory
    incident_id: str
    github: FakeGitHub


def _fixed_incident(repo: Path, memory: Memory, home: Path) -> str:
    failing = git(repo, "rev-parse", "HEAD")
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.orders",
        repo_path=str(repo), commit=failing, error_type="Binder Error",
        error_message='Referenced column "amout" not found',
    )  # fmt: skip
    incident = memory.create_incident(event, "fp1", "ck1")
    branch = f"patchit/{incident.id}"
    git(repo, "switch", "-q", "-c", branch)
    (repo / "orders.sql").write_text("select amount from payments\n")
    commit_all(repo, "patchit: rename amout to amount")
    git(repo, "switch", "-q", "main")
    report = RootCauseReport(
        incident_id=incident.id, status="fixed", classification="code_bug",
        signature="duckdb_column_not_found", reason="a column typo", fingerprint="fp1",
        source="dbt", pipeline_id="shop", unit_id="model.shop.orders",
        error_type="Binder Error", error_message='Referenced column "amout" not found',
        branch=branch, diff="-amout\n+amount", verification="dbt: passed",
    )  # fmt: skip
    candidate = PatchCandidate(
        strategy="duckdb_rename_column", tag="rename_column", rationale="amout -> amount",
        edits=[Edit(path="orders.sql", search="amout", replace="amount")],
    )  # fmt: skip
    memory.record_attempt(incident.id, "fp1", candidate, "-amout\n+amount", "verified")
    md, js = write_report(report, home / "reports")
    memory.transition(incident.id, "fixed", branch=branch, report_md=str(md), report_json=str(js))
    return incident.id


def operator_settings(home: Path, api_url: str) -> None:
    """The operator's delivery target, in `$PATCHIT_HOME/patchit.toml` (never the repo's)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "patchit.toml").write_text(
        f'[delivery]\nprovider = "github"\nrepo = "acme/shop"\napi_url = "{api_url}"\n'
    )


@pytest.fixture
def setup(tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    github = FakeGitHub("acme/shop", remote, TOKEN)
    with serve(github), Memory.open(_patchit_home) as memory:
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        (repo / "orders.sql").write_text("select amout from payments\n")
        operator_settings(_patchit_home, github.url)
        commit_all(repo, "orders")
        git(repo, "remote", "add", "origin", str(remote))
        git(repo, "push", "-q", "origin", "main")
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        incident_id = _fixed_incident(repo, memory, _patchit_home)
        yield Setup(repo, remote, memory, incident_id, github)


def test_pr_pushes_and_opens_once(setup: Setup) -> None:
    before = (git(setup.repo, "status", "--porcelain"), git(setup.repo, "branch", "--show-current"))
    pull = deliver(setup.incident_id, setup.memory)
    assert pull.created and pull.number == 1 and pull.base == "main"
    branch = f"patchit/{setup.incident_id}"
    assert git(setup.remote, "rev-parse", branch) == git(setup.repo, "rev-parse", branch)
    opened = setup.github.pulls[1]
    assert opened["title"] == "patchit: rename amout to amount"
    assert "# patchit incident" in opened["body"] and "amout" in opened["body"]
    again = deliver(setup.incident_id, setup.memory)  # idempotent: updates, never a second
    assert not again.created and again.number == 1 and len(setup.github.pulls) == 1
    incident = setup.memory.get_incident(setup.incident_id)
    assert incident.pr_url == opened["html_url"] and incident.pr_state == "open"
    report = Path(incident.report_md or "").read_text()
    assert f"| pull request | {opened['html_url']} |" in report
    assert (
        git(setup.repo, "status", "--porcelain"),
        git(setup.repo, "branch", "--show-current"),
    ) == before


def test_token_never_stored_or_sent_in_bodies(setup: Setup) -> None:
    deliver(setup.incident_id, setup.memory)
    assert all(TOKEN not in json.dumps(r["body"]) for r in setup.github.requests)
    stores = [setup.memory.path, *Path(setup.memory.path).parent.parent.rglob("*.md")]
    assert all(TOKEN.encode() not in Path(p).read_bytes() for p in stores)


def test_closed_pr_is_reopened_not_duplicated(setup: Setup) -> None:
    deliver(setup.incident_id, setup.memory)
    setup.github.pulls[1]["state"] = "closed"
    pull = deliver(setup.incident_id, setup.memory)
    assert pull.number == 1 and pull.state == "open" and len(setup.github.pulls) == 1


def test_refused_unless_verified(setup: Setup) -> None:
    setup.memory.transition(setup.incident_id, "rejected")
    with pytest.raises(BadInputError, match="is failed: only a verified fix"):
        deliver(setup.incident_id, setup.memory)
    assert setup.github.requests == []
    assert "patchit/" not in git(setup.remote, "branch", "--list")


def test_refused_when_todays_policy_denies_the_file(setup: Setup, _patchit_home: Path) -> None:
    toml = _patchit_home / "patchit.toml"
    toml.write_text(toml.read_text() + '\n[policy]\ndeny = ["*.sql"]\n')
    with pytest.raises(BadInputError, match="today's policy refuses"):
        deliver(setup.incident_id, setup.memory)
    assert setup.github.requests == []


def test_bad_token_is_one_line_without_the_token(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_wrong")
    with pytest.raises(DeliveryError, match="401 Bad credentials") as exc:
        deliver(setup.incident_id, setup.memory)
    assert "ghp_wrong" not in str(exc.value)
    assert setup.memory.delivery_for(setup.incident_id) is None


def test_remote_with_other_commits_is_not_overwritten(setup: Setup, tmp_path: Path) -> None:
    deliver(setup.incident_id, setup.memory)
    other = tmp_path / "reviewer"
    git(tmp_path, "clone", "-q", str(setup.remote), str(other))
    branch = f"patchit/{setup.incident_id}"
    git(other, "switch", "-q", branch)
    (other / "orders.sql").write_text("select amount as amount_usd from payments\n")
    reviewed = commit_all(other, "review: name the column")
    git(other, "push", "-q", "origin", branch)
    git(setup.repo, "switch", "-q", branch)  # the local branch diverges from the remote's
    git(setup.repo, "commit", "-q", "--amend", "-m", "patchit: rename amout to amount (again)")
    git(setup.repo, "switch", "-q", "main")
    with pytest.raises(DeliveryError, match="was refused"):
        deliver(setup.incident_id, setup.memory)
    assert git(setup.remote, "rev-parse", branch) == reviewed


def test_cli_pr_and_incidents(setup: Setup) -> None:
    res = patchit("pr", setup.incident_id)
    assert res.returncode == 0, res.stderr
    assert "pull request #1 opened https://github.example/acme/shop/pull/1" in res.stdout
    listed = patchit("incidents")
    assert "#1 open" in listed.stdout
    assert incidents()[0]["pr_url"] == "https://github.example/acme/shop/pull/1"


def test_cli_without_delivery_config(setup: Setup, _patchit_home: Path) -> None:
    (_patchit_home / "patchit.toml").write_text("")
    res = patchit("pr", setup.incident_id)
    assert res.returncode == 2
    assert "no [delivery] target" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_cli_without_token(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    res = patchit("pr", setup.incident_id)
    assert res.returncode == 2 and "GITHUB_TOKEN is not set" in res.stderr


def test_cli_approve_delivers_and_reject_needs_why(setup: Setup) -> None:
    res = patchit("approve", setup.incident_id, "--why", "checked the totals")
    assert res.returncode == 0, res.stderr
    assert "approved" in res.stdout and "pull request #1 open" in res.stdout
    assert patchit("reject", setup.incident_id).returncode == 2  # --why is required
    res = patchit("reject", setup.incident_id, "--why", "wrong column")
    assert res.returncode == 0, res.stderr
    assert "rejected (failed)" in res.stdout
    assert incidents()[0]["status"] == "failed"


def test_a_repository_cannot_send_the_token_elsewhere(setup: Setup, _patchit_home: Path) -> None:
    hostile = (
        '[delivery]\nprovider = "github"\nrepo = "acme/shop"\napi_url = "{url}"\n'
        'mode = "autonomous"\n'
    )
    with listening() as listener:
        (setup.repo / ".patchit.toml").write_text(hostile.format(url=listener.url))
        landed = commit_all(setup.repo, "settings (a green run was seen here)")
        event = setup.memory.latest_event(setup.incident_id)
        assert event is not None
        setup.memory.record_last_good(project_key(event), landed)
        (setup.repo / ".patchit.toml").write_text(hostile.format(url=listener.url + "/tree"))
        res = patchit("pr", setup.incident_id)  # supervised: a human asks for the PR
    assert res.returncode == 0, res.stderr
    assert listener.heard == []  # nothing, let alone the token
    assert "pull request #1 opened https://github.example/acme/shop/pull/1" in res.stdout
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in setup.github.requests)
    assert (
        f"patchit: {setup.repo / '.patchit.toml'} at {landed[:12]}: [delivery] api_url is the "
        "operator's setting, ignored here; set it in $PATCHIT_HOME/patchit.toml"
    ) in res.stderr
    assert "[delivery] mode = 'autonomous' is looser than the operator's 'supervised'" in (
        res.stderr
    )
    assert listener.url not in res.stderr + res.stdout


def _rename_incident(setup: Setup, follows: dict[str, str]) -> str:
    """A fixed incident whose branch follows `amout` -> `amount` into four files."""
    repo, memory = setup.repo, setup.memory
    for n in range(4):
        (repo / f"m{n}.sql").write_text("select amout from payments\n")
    commit_all(repo, "four readers of amout")
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.m0",
        repo_path=str(repo), commit=git(repo, "rev-parse", "HEAD"), error_type="Binder Error",
        error_message='Referenced column "amout" not found',
    )  # fmt: skip
    incident = memory.create_incident(event, "fp2", "ck2")
    branch = f"patchit/{incident.id}"
    git(repo, "switch", "-q", "-c", branch)
    for n in range(4):
        (repo / f"m{n}.sql").write_text("select amount from payments\n")
    commit_all(repo, "patchit: follow amount")
    git(repo, "switch", "-q", "main")
    edits = [Edit(path=f"m{n}.sql", search="amout", replace="amount") for n in range(4)]
    candidate = PatchCandidate(
        strategy="dbt_follow_column_rename", tag="follow_column_rename", rationale="follow",
        edits=edits, follows=follows,
    )  # fmt: skip
    verified = json.dumps({"candidate": candidate.model_dump(mode="json")})
    attempt = memory.record_attempt(
        incident.id, "fp2", candidate, "diff", "verified", verified_json=verified
    )
    memory.mark_landed(attempt, branch)
    memory.transition(incident.id, "fixed", branch=branch)
    return incident.id


def test_a_followed_rename_counts_once_against_todays_max_files(setup: Setup) -> None:
    pull = deliver(_rename_incident(setup, {"amout": "amount"}), setup.memory)
    assert pull.created


def test_four_files_without_a_rename_are_four_files(setup: Setup) -> None:
    with pytest.raises(BadInputError, match="touches 4 files, more than max_files=3"):
        deliver(_rename_incident(setup, {}), setup.memory)

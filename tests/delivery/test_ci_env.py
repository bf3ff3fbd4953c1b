"""`patchit ci` reads its pull request from the environment GitHub Actions gives a job; a
missing or partial environment is one line naming the variable, exit 2, before dbt starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.delivery.ci_env import REQUIRED, read_pull_request_job
from patchit.errors import BadInputError


def pull_request_event(
    number: int = 7,
    head: tuple[str, str] = ("feature/amount", "a" * 40),
    base: tuple[str, str] = ("main", "b" * 40),
    repo: str = "acme/shop",
    head_repo: str | None = None,
) -> dict[str, object]:
    """A `pull_request` webhook payload as GitHub writes it to GITHUB_EVENT_PATH (trimmed to
    the fields a reader would look at, names and nesting as documented)."""
    owner = repo.split("/")[0]

    def side(ref: str, sha: str, full_name: str | None) -> dict[str, object]:
        repository = None if full_name is None else {
            "id": 1, "name": full_name.split("/")[1], "full_name": full_name,
            "owner": {"login": full_name.split("/")[0]}, "fork": full_name != repo,
        }  # fmt: skip
        return {"label": f"{owner}:{ref}", "ref": ref, "sha": sha, "repo": repository,
                "user": {"login": owner}}  # fmt: skip

    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "url": f"https://api.github.com/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "number": number, "state": "open", "title": "Rename the amount column",
            "user": {"login": "dana"}, "draft": False, "merged": False,
            "head": side(*head, repo if head_repo is None else head_repo),
            "base": side(*base, repo),
        },
        "repository": {"full_name": repo, "default_branch": "main"},
        "sender": {"login": "dana"},
    }  # fmt: skip


def actions_env(event_path: Path, event: dict[str, object], **extra: str) -> dict[str, str]:
    event_path.write_text(json.dumps(event))
    pull = event["pull_request"]
    assert isinstance(pull, dict)
    return {
        "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event_path), "GITHUB_REPOSITORY": "acme/shop",
        "GITHUB_SHA": pull["head"].get("sha", "c" * 40),
        "GITHUB_REF": f"refs/pull/{pull['number']}/merge",
        "GITHUB_HEAD_REF": pull["head"]["ref"], "GITHUB_BASE_REF": pull["base"]["ref"],
        **extra,
    }  # fmt: skip


def test_a_pull_request_job_is_read(tmp_path: Path) -> None:
    env = actions_env(tmp_path / "event.json", pull_request_event(), GITHUB_TOKEN="ghs_x",
                      GITHUB_API_URL="https://ghe.example/api/v3/",
                      GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))  # fmt: skip
    job = read_pull_request_job(env)
    assert (job.number, job.head_ref, job.base_ref, job.repository) == (
        7, "feature/amount", "main", "acme/shop",
    )  # fmt: skip
    assert (job.head_sha, job.base_sha) == ("a" * 40, "b" * 40)
    assert (
        job.api_url == "https://ghe.example/api/v3" and job.step_summary == tmp_path / "summary.md"
    )
    assert job.can_write and not job.from_fork


def test_a_fork_or_no_token_cannot_write(tmp_path: Path) -> None:
    fork = pull_request_event(head_repo="mallory/shop")
    job = read_pull_request_job(actions_env(tmp_path / "e.json", fork, GITHUB_TOKEN="ghs_x"))
    assert job.from_fork and not job.can_write and "mallory/shop" in job.read_only_reason()
    deleted = pull_request_event()
    deleted["pull_request"]["head"]["repo"] = None  # type: ignore[index]
    assert read_pull_request_job(
        actions_env(tmp_path / "d.json", deleted, GITHUB_TOKEN="t")
    ).from_fork
    job = read_pull_request_job(actions_env(tmp_path / "n.json", pull_request_event()))
    assert not job.can_write and "GITHUB_TOKEN" in job.read_only_reason()
    assert job.api_url == "https://api.github.com"


@pytest.mark.parametrize("name", REQUIRED)
def test_each_missing_variable_is_named(tmp_path: Path, name: str) -> None:
    env = actions_env(tmp_path / "event.json", pull_request_event())
    env[name] = ""
    with pytest.raises(BadInputError, match=f"^{name} is not set"):
        read_pull_request_job(env)


def test_partial_or_wrong_environments_are_one_line(tmp_path: Path) -> None:
    good = actions_env(tmp_path / "event.json", pull_request_event())
    cases = {
        "GITHUB_EVENT_PATH .*no such file": {"GITHUB_EVENT_PATH": str(tmp_path / "gone.json")},
        "GITHUB_REPOSITORY='shop'": {"GITHUB_REPOSITORY": "shop"},
        "GITHUB_HEAD_REF='other' differs": {"GITHUB_HEAD_REF": "other"},
    }
    for pattern, change in cases.items():
        with pytest.raises(BadInputError, match=pattern):
            read_pull_request_job({**good, **change})
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main", "after": "c" * 40}))
    with pytest.raises(BadInputError, match="not a pull_request event"):
        read_pull_request_job({**good, "GITHUB_EVENT_PATH": str(push)})
    broken = pull_request_event()
    del broken["pull_request"]["head"]["sha"]  # type: ignore[attr-defined]
    with pytest.raises(BadInputError, match=r"no valid `pull_request\.head\.sha`"):
        read_pull_request_job(actions_env(tmp_path / "b.json", broken))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(BadInputError, match="not readable JSON"):
        read_pull_request_job({**good, "GITHUB_EVENT_PATH": str(tmp_path / "bad.json")})


def test_cli_without_the_environment_is_one_line_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PATCHIT_HOME"] = str(tmp_path / "home")
    res = subprocess.run([sys.executable, "-m", "patchit", "ci", "--", "build"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        "patchit: error: GITHUB_EVENT_PATH is not set: `patchit ci` runs in a GitHub Actions "
        "job of a pull_request event (see docs/how-to/ci.md), which sets it"
    ]
    assert res.stdout == "" and not (tmp_path / "home").exists()  # nothing half-written
    env.update(actions_env(tmp_path / "event.json", pull_request_event()))
    env["GITHUB_BASE_REF"] = ""
    res = subprocess.run([sys.executable, "-m", "patchit", "ci", "--", "build"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and "GITHUB_BASE_REF is not set" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_a_clone_without_the_merge_base_stops_before_dbt(tmp_path: Path) -> None:
    from tests.conftest import commit_all, git

    repo = tmp_path / "shop"
    repo.mkdir()
    (repo / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    git(repo, "init", "-q", "-b", "feature/amount")
    head = commit_all(repo, "shop")
    event = pull_request_event(head=("feature/amount", head), base=("main", "b" * 40))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(actions_env(tmp_path / "event.json", event, GITHUB_TOKEN="ghs_x"))
    env["PATCHIT_HOME"] = str(tmp_path / "home")
    res = subprocess.run([sys.executable, "-m", "patchit", "ci", "--", "build"], cwd=repo,
                         env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert "the merge base of main (bbbbbbbbbbbb)" in line and "fetch-depth: 0" in line
    assert res.stdout == "" and not (repo / "target").exists()  # dbt never started

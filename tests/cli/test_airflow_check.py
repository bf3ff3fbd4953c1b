"""`patchit airflow check [--changed-only]`: a DAG file the change broke with an Airflow 2
idiom is imported as the DAG processor would, healed on a verified branch, and the exit code
says it still fails here; a broken file the change did not touch is left out.

In a pull request's GitHub Actions job (a `pull_request` payload as GitHub writes it, a bare
remote, the local GitHub stand-in) the fix arrives in the pull request as `patchit ci`'s do: a
suggestion on the line, one summary comment that names the DAG check and is edited in place,
the status `patchit`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.delivery.ci_summary import DAG_CHECK, render_summary
from tests.cli.helpers import incidents, patchit
from tests.conftest import commit_all, git
from tests.delivery.github_server import FakeGitHub, serve
from tests.delivery.test_ci_env import actions_env, pull_request_event
from tests.test_loop_airflow3 import SCHEDULE_INTERVAL_DAG

TOKEN = "ghs_" + "a" * 36

# "airflow" and "dag" in the text: the DAG processor's safe mode skips files without them
LEGACY = "from airflow.sdk import dag  # noqa\nimport patchit_no_such_module  # noqa\n"


def dag_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "legacy.py").write_text(LEGACY)  # broken before the change: not its doing
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    (repo / "dags" / "nightly.py").write_text(SCHEDULE_INTERVAL_DAG)
    commit_all(repo, "nightly: port from Airflow 2")
    return repo


@pytest.mark.slow
def test_the_changed_dag_file_is_healed_and_the_untouched_one_left_out(
    tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    for name in [k for k in os.environ if k.startswith("GITHUB_")]:
        monkeypatch.delenv(name)
    repo = dag_repo(tmp_path)
    res = patchit("airflow", "check", "--dags-folder", str(repo / "dags"), "--changed-only")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    assert "1 DAG file(s) that fail to import were not changed" in res.stderr
    assert "1 DAG file(s) fail to import" in res.stdout
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr[-3000:]
    fixed = git(repo, "show", f"{incident['branch']}:dags/nightly.py")
    assert fixed == SCHEDULE_INTERVAL_DAG.replace("schedule_interval=", "schedule=").strip()
    assert git(repo, "status", "--porcelain") == ""


def test_bad_input_is_one_line(tmp_path: Path, _patchit_home: Path) -> None:
    res = patchit("airflow", "check", "--dags-folder", str(tmp_path / "none"))
    assert res.returncode == 2 and "no DAG folder there" in res.stderr
    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "a.py").write_text("x = 1\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    res = patchit("airflow", "check", "--dags-folder", str(repo / "dags"), "--changed-only",
                  "--base", "no-such-rev")  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"patchit: error: --base no-such-rev: no such commit in {repo.resolve()}; fetch it "
        "(actions/checkout `fetch-depth: 0`)"
    ]


def _check_in_pull_request(
    repo: Path, github: FakeGitHub, tmp: Path, **changes: str
) -> subprocess.CompletedProcess[str]:
    """`patchit airflow check --changed-only` as pull request #7's job runs it."""
    pull = github.pulls[7]
    event = pull_request_event(7, (pull["head"]["ref"], pull["head"]["sha"]),
                               ("main", pull["base"]["sha"]))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(actions_env(tmp / "event.json", event))
    env.update(GITHUB_TOKEN=TOKEN, GITHUB_API_URL=github.url,
               GITHUB_STEP_SUMMARY=str(tmp / "step-summary.md"),
               RUNNER_TEMP=str(tmp / "runner-temp"), **changes)  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "patchit", "airflow", "check", "--dags-folder", str(repo / "dags"),
         "--changed-only"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_in_a_pull_request_the_fix_is_a_suggestion_and_one_summary_names_the_dag_check(
    tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "legacy.py").write_text(LEGACY)  # broken on main: not the pull request's
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    git(repo, "switch", "-q", "-c", "feature/nightly")
    (repo / "dags" / "nightly.py").write_text(SCHEDULE_INTERVAL_DAG)
    commit_all(repo, "nightly: port from Airflow 2")
    git(repo, "push", "-q", "origin", "feature/nightly")
    github = FakeGitHub("acme/shop", remote, TOKEN)
    with serve(github):
        github.add_pull(7, "feature/nightly", "main")
        first = _check_in_pull_request(repo, github, tmp_path)
        assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
        assert "1 DAG file(s) fail to import" in first.stdout
        [review] = github.reviews.get(7) or [None]
        assert review is not None, first.stdout[-3000:] + first.stderr[-3000:]
        [comment] = review["comments"]
        assert (comment["path"], comment["line"], comment["side"]) == (
            "dags/nightly.py",
            6,
            "RIGHT",
        )
        fixed = '@dag(schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False)'
        assert f"```suggestion\n{fixed}\n```" in comment["body"]
        assert review["commit_id"] == github.pulls[7]["head"]["sha"]
        [summary] = github.comments.values()
        body = summary["body"]
        assert body.startswith("<!-- patchit:summary -->")
        assert "The DAG check failed (exit 1)" in body and "dbt" not in body.split("\n")[3]
        assert "suggested in a review" in body
        assert [(s["state"], s["description"][:21]) for s in github.statuses] == [
            ("failure", "The DAG check failed:"),
        ]  # fmt: skip
        assert "legacy.py" not in body  # broken before the pull request: not its doing

        second = _check_in_pull_request(repo, github, tmp_path)
        assert second.returncode == 1, second.stderr[-3000:]
        assert list(github.comments) == [summary["id"]]  # edited in place, not a second
        assert len(github.reviews[7]) == 1  # the same suggestion is not made twice

        # the author commits the suggestion: the next run is green and says so
        dag = repo / "dags" / "nightly.py"
        lines = dag.read_text().split("\n")
        lines[comment["line"] - 1] = fixed
        dag.write_text("\n".join(lines))
        commit_all(repo, "Apply suggestions from code review")
        git(repo, "push", "-q", "origin", "feature/nightly")
        github.add_pull(7, "feature/nightly", "main")
        green = _check_in_pull_request(repo, github, tmp_path)
        assert green.returncode == 0, green.stdout[-3000:] + green.stderr[-3000:]
        assert list(github.comments) == [summary["id"]]
        assert "The DAG check passed" in github.comments[summary["id"]]["body"]
        assert [s["state"] for s in github.statuses] == ["failure", "failure", "success"]
    assert git(repo, "status", "--porcelain") == ""


def test_a_partial_pull_request_environment_is_one_line(
    tmp_path: Path, _patchit_home: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "a.py").write_text("x = 1\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    github = FakeGitHub("acme/shop", tmp_path, TOKEN)
    github.pulls[7] = {"head": {"ref": "feature/x", "sha": "a" * 40},
                       "base": {"ref": "main", "sha": "b" * 40}}  # fmt: skip
    res = _check_in_pull_request(repo, github, tmp_path, GITHUB_BASE_REF="")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        "patchit: error: GITHUB_BASE_REF is not set: `patchit airflow check` runs in a GitHub "
        "Actions job of a pull_request event (see docs/how-to/ci.md), which sets it"
    ]


def test_the_summary_headline_names_what_ran() -> None:
    args = ([], 1, "c" * 40, "", "")
    dag = render_summary(*args, runtime=DAG_CHECK).split("\n")[3]
    assert dag == (f"The DAG check failed (exit 1) on `{'c' * 12}`: 0 incident(s), 0 with a "
                   "verified fix. The check still fails until a fix is applied.")  # fmt: skip
    assert render_summary([], 0, "c" * 40, "", "", DAG_CHECK).split("\n")[3] == (
        f"The DAG check passed on `{'c' * 12}`: every DAG file checked imports."
    )
    assert render_summary(*args).split("\n")[3] == (
        f"dbt failed (exit 1) on `{'c' * 12}`: 0 incident(s), 0 with a verified fix. The build "
        "still fails until a fix is applied."
    )
    assert render_summary([], 0, "c" * 40, "", "").split("\n")[3] == (
        f"dbt passed on `{'c' * 12}`: nothing to heal."
    )

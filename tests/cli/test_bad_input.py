"""Bad input: one clear line naming the input, a non-zero exit, nothing half-made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt, user_state
from tests.conftest import git


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("patchit: error:"), stderr
    return lines[0]


def test_not_a_dbt_project(tmp_path: Path) -> None:
    res = patchit("dbt", "--project-dir", str(tmp_path), "--", "build")
    assert res.returncode == 2
    assert "not a dbt project" in one_error_line(res.stderr)
    assert incidents() == []


def test_missing_project_dir(tmp_path: Path) -> None:
    res = patchit("dbt", "--project-dir", str(tmp_path / "nope"), "--", "build")
    assert res.returncode == 2
    line = one_error_line(res.stderr)
    assert f"--project-dir {tmp_path / 'nope'}: does not exist" in line


def test_misspelt_patchit_option_is_not_passed_to_dbt(tmp_path: Path) -> None:
    res = patchit("dbt", "--projectdir", str(tmp_path), "--", "build")
    assert res.returncode == 2
    assert "No such option '--projectdir'" in res.stderr
    assert "--project-dir" in res.stderr  # patchit's suggestion, not dbt's
    assert "deprecated-defer" not in res.stderr
    assert res.stdout == ""


def test_no_dbt_command(tmp_path: Path) -> None:
    res = patchit("dbt", "--project-dir", str(tmp_path))
    assert res.returncode == 2
    assert "no dbt command" in one_error_line(res.stderr)


def test_event_file_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "event.json"
    bad.write_text('{"source": "dbt", "pipeline_id": ')
    res = patchit("heal", str(bad))
    assert res.returncode == 2
    line = one_error_line(res.stderr)
    assert str(bad) in line and "not valid JSON" in line
    assert incidents() == []


def test_event_file_fails_schema(tmp_path: Path) -> None:
    bad = tmp_path / "event.json"
    bad.write_text(json.dumps({"source": "dbt", "pipeline_id": "shop", "unit_id": 3, "bogus": 1}))
    res = patchit("heal", str(bad))
    assert res.returncode == 2
    assert "does not match the event schema" in one_error_line(res.stderr)
    assert incidents() == []


def test_event_file_missing(tmp_path: Path) -> None:
    res = patchit("heal", str(tmp_path / "missing.json"))
    assert res.returncode == 2
    assert "cannot read event file" in one_error_line(res.stderr)


def test_event_repo_not_git(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "source": "dbt",
                "pipeline_id": "shop",
                "unit_id": "model.shop.x",
                "repo_path": str(tmp_path),
                "commit": "0" * 40,
            }
        )
    )
    res = patchit("heal", str(event))
    assert res.returncode == 2
    assert "not a git repository" in one_error_line(res.stderr)
    assert incidents() == []


def test_event_without_repo_path(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"source": "dbt", "pipeline_id": "shop", "unit_id": "m"}))
    res = patchit("heal", str(event))
    assert res.returncode == 2
    line = one_error_line(res.stderr)
    assert "has no repo_path" in line and "None" not in line
    assert incidents() == []


def test_unknown_incident_report() -> None:
    res = patchit("report", "20990101-abcdef")
    assert res.returncode == 2
    assert "20990101-abcdef" in one_error_line(res.stderr)


def test_schema_prints_the_event_schema() -> None:
    res = patchit("schema")
    assert res.returncode == 0
    schema = json.loads(res.stdout)
    assert schema["title"] == "UniversalFailureEvent"
    assert {"source", "unit_id", "error_message", "repo_path", "commit"} <= set(
        schema["properties"]
    )
    assert schema.get("additionalProperties") is False


@pytest.mark.slow
def test_truncated_run_artifacts_do_not_matter(shop_repo: Path) -> None:
    # a truncated run_results.json/manifest.json left by an earlier run is never read
    target = shop_repo / "target"
    (target / "run_results.json").write_text('{"results": [')
    (target / "manifest.json").write_text("{")
    before = user_state(shop_repo)
    res = patchit_dbt(shop_repo, "build")
    assert res.returncode == 0, res.stderr
    assert incidents() == []
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    assert before["head"] == user_state(shop_repo)["head"]


def _event_file(tmp_path: Path, **fields: object) -> Path:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"source": "dbt", "pipeline_id": "shop", **fields}))
    return path


@pytest.mark.slow
def test_event_with_unknown_commit(shop_repo: Path, tmp_path: Path) -> None:
    bad = _event_file(
        tmp_path, unit_id="model.shop.orders", repo_path=str(shop_repo), commit="f" * 40
    )
    res = patchit("heal", str(bad))
    assert res.returncode == 2
    assert "is not in" in one_error_line(res.stderr)
    assert incidents() == []


@pytest.mark.slow
def test_event_with_escaping_unit_path(shop_repo: Path, tmp_path: Path) -> None:
    head = git(shop_repo, "rev-parse", "HEAD")
    bad = _event_file(
        tmp_path,
        unit_id="model.shop.orders",
        repo_path=str(shop_repo),
        commit=head,
        unit_path="../../../etc/passwd",
    )
    res = patchit("heal", str(bad))
    assert res.returncode == 2
    assert "inside the repository" in one_error_line(res.stderr)
    assert incidents() == []


@pytest.mark.slow
def test_dbt_event_without_its_invocation(shop_repo: Path, tmp_path: Path) -> None:
    head = git(shop_repo, "rev-parse", "HEAD")
    bad = _event_file(tmp_path, unit_id="model.shop.orders", repo_path=str(shop_repo), commit=head)
    res = patchit("heal", str(bad))
    assert res.returncode == 2
    assert "`dbt` invocation block" in one_error_line(res.stderr)
    assert incidents() == []


@pytest.mark.slow  # runs `dbt --version`
def test_version_and_usage_errors_pass_through(tmp_path: Path) -> None:
    res = patchit("dbt", "--project-dir", str(tmp_path), "--", "--version")
    assert res.returncode == 2  # not a dbt project: patchit's own error before dbt starts
    (tmp_path / "dbt_project.yml").write_text("name: p\nversion: '1.0.0'\nprofile: p\n")
    res = patchit("dbt", "--project-dir", str(tmp_path), "--no-heal", "--", "--version")
    assert res.returncode == 0, res.stderr
    assert "installed:" in res.stdout
    res = patchit("dbt", "--project-dir", str(tmp_path), "--no-heal", "--", "biuld")
    assert res.returncode == 2
    assert "No such command 'biuld'" in res.stderr
    assert incidents() == []

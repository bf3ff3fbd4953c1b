"""Bad input: one clear line naming the input, a non-zero exit, nothing half-made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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
    assert str(bad) in line and "not valid JSON: truncated" in line
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


# Issue 12: of 216 malformed event files, 9 gave tracebacks and 8 hung over 90 s; a FIFO as the
# event file blocked forever. Each kind, as `patchit heal FILE` sees it: one line, exit 2, soon.
def _malformed(kind: str, tmp_path: Path) -> str:
    path = tmp_path / "event.json"
    base = '{"source": "airflow", "pipeline_id": "d", "unit_id": "t", "error_message": '
    if kind == "non-UTF-8 bytes":
        path.write_bytes(base.encode() + b'"caf\xe9 \xff\xfe"}')
    elif kind == "deep nesting":
        path.write_text(base + '"x", "context": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    elif kind == "lone surrogate (escaped)":
        path.write_text(base + '"caf\\udce9 \\ud800"}')
    elif kind == "lone surrogate (raw bytes)":
        path.write_bytes(base.encode() + b'"caf\xed\xb3\xa9"}')
    elif kind == "5,000-character path":
        return str(tmp_path / ("e" * 5000 + ".json"))
    elif kind == "huge number":
        path.write_text(base + '"x", "try_number": ' + "9" * 5000 + "}")
    elif kind == "huge field":
        message = "password=x://a:b@" * 300_000  # 5 MB of what the redactor looks for
        path.write_text(base + json.dumps(message) + "}")
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        return "/dev/zero"
    elif kind == "directory":
        path.mkdir()
    elif kind == "newline in the name":
        path = tmp_path / "event\nname.json"
    return str(path)


MALFORMED = [
    "non-UTF-8 bytes", "deep nesting", "lone surrogate (escaped)", "lone surrogate (raw bytes)",
    "5,000-character path", "huge number", "huge field", "FIFO", "/dev/zero", "directory",
    "newline in the name",
]  # fmt: skip


@pytest.mark.parametrize("kind", MALFORMED)
def test_malformed_event_files_are_one_line_and_exit_2(kind: str, tmp_path: Path) -> None:
    started = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "patchit", "heal", _malformed(kind, tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,  # a FIFO used to block here forever
    )
    assert res.returncode == 2, res.stderr[-2000:]
    one_error_line(res.stderr)
    assert "Traceback" not in res.stderr
    assert time.monotonic() - started < 30
    assert incidents() == []

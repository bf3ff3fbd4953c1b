"""`worker --once`, the fresh process per run of `DbtHarness(warm=False)`: real dbt."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.sandbox.snapshot import PARTIAL_PARSE_FILE
from tests.conftest import run_dbt

pytestmark = pytest.mark.slow


def _once(request: dict[str, object] | str, cwd: Path) -> tuple[int, dict[str, object]]:
    line = request if isinstance(request, str) else json.dumps(request)
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "patchit.harnesses.dbt.worker", "--once"],
        input=line + "\n", cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_a_bad_request_is_answered_and_nothing_runs(tmp_path: Path) -> None:
    code, reply = _once("{not json", tmp_path)
    assert code == 2 and reply["success"] is False
    assert str(reply["exception"]).startswith("bad request")
    code, reply = _once({"args": "build"}, tmp_path)
    assert code == 2 and "`args` list" in str(reply["exception"])


def _request(project: Path, scratch: Path, spec: dict[str, str]) -> dict[str, object]:
    args = ["build", "--select", "daily_revenue", "--project-dir", str(project),
            "--profiles-dir", str(project), "--target-path", str(scratch / "target"),
            "--log-path", str(scratch / "logs")]  # fmt: skip
    return {"args": args, "cwd": str(project), "env": {}, "log_path": str(scratch / "out.log"),
            "saved_parse": spec}  # fmt: skip


def test_a_parse_it_cannot_decode_is_never_read_un_rooted(shop_repo: Path, tmp_path: Path) -> None:
    """The seeded file is the user's parse, rooted at the user's project: decoded, it is
    re-rooted in memory and dbt parses partially; when its hash is not the harness's, the
    process removes it and dbt parses in full, from the worktree's own files."""
    assert run_dbt(shop_repo, "parse").returncode == 0
    project = tmp_path / "wt"
    shutil.copytree(shop_repo, project, ignore=shutil.ignore_patterns(".git", "target", "logs"))
    user = shop_repo / "target" / PARTIAL_PARSE_FILE
    digest = hashlib.sha256(user.read_bytes()).hexdigest()
    for name, sha in (("good", digest), ("bad", "0" * 64)):
        scratch = tmp_path / name
        (scratch / "target").mkdir(parents=True)
        seeded = scratch / "target" / PARTIAL_PARSE_FILE
        shutil.copyfile(user, seeded)
        spec = {"source": str(seeded), "sha256": sha, "root": str(project), "file": str(seeded)}
        code, reply = _once(_request(project, scratch, spec), project)
        assert code == 0 and reply["success"], reply
        if name == "good":
            assert reply["parse"] == "partial" and reply["saved_parse_kept"]
            assert seeded.read_bytes() == user.read_bytes()  # a partial parse is not written
        else:
            assert reply["parse"] == "full" and not reply["saved_parse_kept"]
            assert seeded.read_bytes() != user.read_bytes()  # dbt wrote its own full parse
        phases = reply["phases_ms"]
        assert isinstance(phases, dict) and phases["read parse"] > 0

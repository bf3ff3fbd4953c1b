"""Run the real `patchit` CLI in a subprocess, the way users and cron do."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import git


def patchit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )


def patchit_dbt(
    repo: Path, *dbt_args: str, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return patchit(
        "dbt",
        "--project-dir",
        str(repo),
        *extra,
        "--",
        *dbt_args,
        "--profiles-dir",
        str(repo),
        cwd=repo,
    )


def incidents() -> list[dict[str, Any]]:
    res = patchit("incidents", "--json")
    assert res.returncode == 0, res.stderr
    data: list[dict[str, Any]] = json.loads(res.stdout)
    return data


def user_state(repo: Path) -> dict[str, str]:
    """Everything a user would notice changing: tree, HEAD, branch, worktrees, database."""
    db = repo / "shop.duckdb"
    return {
        "status": git(repo, "status", "--porcelain", "--ignored"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "branch", "--show-current"),
        "worktrees": git(repo, "worktree", "list", "--porcelain").split("\n\n")[0],
        "n_worktrees": str(git(repo, "worktree", "list").count("\n") + 1),
        "db": hashlib.sha256(db.read_bytes()).hexdigest() if db.exists() else "",
    }

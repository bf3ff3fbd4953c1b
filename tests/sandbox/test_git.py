"""run_git and the small git queries, against real repositories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchit.errors import VcsError
from patchit.sandbox.git import dirty_tracked_files, head_commit, repo_root, run_git
from tests.conftest import git


def test_run_git_never_runs_the_users_hooks(shop_repo: Path) -> None:
    hook = shop_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho hook ran >&2\nexit 1\n")
    hook.chmod(0o755)
    (shop_repo / "README.md").write_text("shop\n")
    run_git(shop_repo, "add", "README.md")
    run_git(
        shop_repo, "-c", "user.name=patchit", "-c", "user.email=p@x", "commit", "-q", "-m", "docs"
    )
    assert git(shop_repo, "log", "-1", "--format=%s") == "docs"


def test_run_git_failure_carries_stderr(shop_repo: Path) -> None:
    with pytest.raises(VcsError, match="no-such-ref"):
        run_git(shop_repo, "rev-parse", "--verify", "no-such-ref")
    assert run_git(shop_repo, "rev-parse", "--verify", "no-such-ref", check=False) == ""


def test_repo_root_and_head(shop_repo: Path, tmp_path: Path) -> None:
    assert repo_root(shop_repo / "models" / "marts") == shop_repo.resolve()
    assert repo_root(shop_repo / "models" / "marts" / "orders.sql") == shop_repo.resolve()
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert repo_root(outside) is None
    assert head_commit(shop_repo) == git(shop_repo, "rev-parse", "HEAD")


def test_dirty_tracked_files_ignores_untracked(shop_repo: Path) -> None:
    assert dirty_tracked_files(shop_repo) == []
    (shop_repo / "models" / "scratch.sql").write_text("select 1\n")  # untracked: not dirty
    orders = shop_repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text() + "\n-- edited\n")
    seeds = shop_repo / "seeds" / "raw_orders.csv"
    seeds.write_text(seeds.read_text() + "\n")
    git(shop_repo, "add", "seeds/raw_orders.csv")  # staged changes count too
    assert dirty_tracked_files(shop_repo) == ["models/marts/orders.sql", "seeds/raw_orders.csv"]
    assert dirty_tracked_files(shop_repo, shop_repo / "models") == ["models/marts/orders.sql"]
    assert dirty_tracked_files(shop_repo, Path("seeds")) == ["seeds/raw_orders.csv"]


def test_run_git_extra_config_and_environment(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", config=("init.defaultBranch=trunk",))
    assert run_git(tmp_path, "symbolic-ref", "--short", "HEAD").strip() == "trunk"
    hooks = tmp_path / "my-hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (hooks / "pre-commit").chmod(0o755)
    (tmp_path / "a.txt").write_text("a\n")
    run_git(tmp_path, "add", "a.txt")
    identity = {"GIT_AUTHOR_NAME": "Env Author", "GIT_AUTHOR_EMAIL": "env@example.com"}
    run_git(
        tmp_path,
        *("commit", "-q", "-m", "one"),
        # extra config can set an identity but never turn the user's hooks back on
        config=(f"core.hooksPath={hooks}", "user.name=Config Name", "user.email=c@example.com"),
        env={**os.environ, **identity},
    )
    log = run_git(tmp_path, "log", "-1", "--format=%an|%cn").strip()
    assert log == "Env Author|Config Name"


def test_run_git_timeout_is_a_vcs_error(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q")
    # the sleep lets go of git's output pipes, so the kill is not waited out
    nap = "alias.nap=!exec sleep 5 >/dev/null 2>&1"
    with pytest.raises(VcsError, match=r"git nap in .* timed out after 0\.2 s"):
        run_git(tmp_path, "nap", config=(nap,), timeout_s=0.2)

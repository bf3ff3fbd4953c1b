"""run_git and the small git queries, against real repositories."""

from __future__ import annotations

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

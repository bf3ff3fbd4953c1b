"""Worktrees hold candidates without changing anything the user can see."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from patchit.errors import VcsError
from patchit.sandbox.worktree import (
    carry_packages,
    create_worktree,
    remove_worktree,
    worktree,
    worktrees_home,
)
from tests.conftest import commit_all, git


def user_visible_state(repo: Path) -> dict[str, str]:
    """What the user would notice: status (ignored files too), HEAD, branch, index, DB bytes."""
    return {
        "status": git(repo, "status", "--porcelain", "--ignored"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "db": hashlib.sha256((repo / "shop.duckdb").read_bytes()).hexdigest(),
        "branches": git(repo, "branch", "--list"),
    }


def test_worktree_lifecycle_leaves_the_user_repo_identical(shop_repo: Path) -> None:
    (shop_repo / "notes.txt").write_text("untracked, must survive\n")
    orders = shop_repo / "models" / "marts" / "orders.sql"
    orders.write_text(orders.read_text() + "-- work in progress\n")  # an unstaged edit
    before = user_visible_state(shop_repo)
    commit = git(shop_repo, "rev-parse", "HEAD")

    dest = worktrees_home() / "incident-1" / "candidate-1"
    root = create_worktree(shop_repo, commit, dest)
    assert root == dest.resolve()
    assert git(root, "rev-parse", "HEAD") == commit
    assert "work in progress" not in (root / "models" / "marts" / "orders.sql").read_text()
    (root / "models" / "marts" / "orders.sql").write_text("select 1 as patched\n")
    commit_all(root, "candidate patch")
    assert user_visible_state(shop_repo) == before

    remove_worktree(shop_repo, root)
    remove_worktree(shop_repo, root)  # idempotent
    assert not root.exists()
    assert user_visible_state(shop_repo) == before
    assert (shop_repo / "notes.txt").read_text() == "untracked, must survive\n"
    assert str(root) not in git(shop_repo, "worktree", "list")


def test_worktree_context_manager_removes_on_error(shop_repo: Path) -> None:
    dest = worktrees_home() / "ctx"
    with pytest.raises(RuntimeError), worktree(shop_repo, "HEAD", dest) as root:
        assert (root / "dbt_project.yml").is_file()
        raise RuntimeError("candidate blew up")
    assert not dest.exists()
    assert git(shop_repo, "worktree", "list").count("\n") == 0


def test_worktree_refuses_a_bad_destination(shop_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(VcsError, match="inside the repository"):
        create_worktree(shop_repo, "HEAD", shop_repo / "sandbox")
    with pytest.raises(VcsError, match="already exists"):
        create_worktree(shop_repo, "HEAD", tmp_path)
    assert not (shop_repo / "sandbox").exists()


def test_carry_packages_copies_installed_packages(shop_repo: Path) -> None:
    package = shop_repo / "dbt_packages" / "dbt_utils" / "macros"
    package.mkdir(parents=True)
    (package / "star.sql").write_text("{% macro star() %}*{% endmacro %}\n")
    with worktree(shop_repo, "HEAD", worktrees_home() / "pk") as root:
        assert not (root / "dbt_packages").exists()  # ignored, so the worktree lacks it
        carried = carry_packages(shop_repo, root)
        assert carried == root / "dbt_packages"
        assert (carried / "dbt_utils" / "macros" / "star.sql").is_file()
        assert carry_packages(shop_repo, root) is None  # already there: left alone
    assert (package / "star.sql").is_file()


def test_carry_packages_without_packages_is_a_no_op(shop_repo: Path, tmp_path: Path) -> None:
    dest = tmp_path / "wt-project"
    dest.mkdir()
    assert carry_packages(shop_repo, dest) is None
    assert list(dest.iterdir()) == []

"""The uncommitted-work snapshot on real git (no dbt): what it holds, and that the user's tree,
index and stash list are exactly as they were."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchit.errors import VcsError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.intake.worktree_snapshot import (
    CONTEXT_KEY,
    find_uncommitted,
    snapshot_of,
    snapshot_uncommitted,
    take_snapshot,
)
from tests.conftest import commit_all, git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository holding a dbt-shaped project under `proj/` (no dbt runs here)."""
    root = tmp_path / "repo"
    proj = root / "proj"
    (proj / "models").mkdir(parents=True)
    (proj / "sql").mkdir()
    (proj / "dbt_project.yml").write_text("name: p\nmacro-paths: [sql]\n")
    (proj / "models" / "stg.sql").write_text("select 1 as id, 'a' as name\n")
    (proj / "models" / "mart.sql").write_text("select id, name from {{ ref('stg') }}\n")
    (proj / "models" / "old.sql").write_text("select 2 as id\n")
    (proj / "sql" / "m.sql").write_text("{% macro m() %}1{% endmacro %}\n")
    (root / ".gitignore").write_text("proj/ignored.sql\n")
    (root / "README").write_text("top\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "initial")
    return root


def user_state(repo: Path) -> tuple[str, bytes, str, str, str]:
    return (
        git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        (repo / ".git" / "index").read_bytes(),
        git(repo, "stash", "list"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
    )


def edit_everything(repo: Path) -> None:
    proj = repo / "proj"
    stg = proj / "models" / "stg.sql"
    stg.write_text(stg.read_text().replace("as name", "as full_name"))  # unstaged
    git(repo, "mv", "proj/models/old.sql", "proj/models/renamed.sql")  # staged rename
    mart = proj / "models" / "mart.sql"
    mart.write_text("select id from {{ ref('stg') }}\n")
    git(repo, "add", "proj/models/mart.sql")  # staged, then edited again: the tree counts
    mart.write_text("select id, full_name from {{ ref('stg') }}\n")
    (proj / "models" / "new.sql").write_text("select 3 as id\n")  # untracked, read by dbt
    (proj / "sql" / "new_macro.sql").write_text("{% macro n() %}2{% endmacro %}\n")
    (proj / "notes.txt").write_text("scratch\n")  # untracked, not read by dbt
    (proj / "profiles.yml").write_text("p: {outputs: {dev: {password: x}}}\n")  # never taken
    (proj / "ignored.sql").write_text("select 4\n")  # ignored
    (proj / "target").mkdir()
    (proj / "target" / "run.sql").write_text("select 5\n")  # dbt's output
    (repo / "README").write_text("changed outside the project\n")


def test_snapshot_holds_the_working_tree_and_changes_nothing_the_user_sees(repo: Path) -> None:
    edit_everything(repo)
    git(repo, "stash", "list")
    before = user_state(repo)
    head = before[3]
    snap = snapshot_uncommitted(repo, repo / "proj", head)
    assert snap is not None
    assert user_state(repo) == before  # status, index bytes, stash list, HEAD, branch
    assert snap.base == head
    assert git(repo, "rev-list", "--parents", "-1", snap.commit).split() == [snap.commit, head]
    assert snap.files == (
        "proj/models/mart.sql", "proj/models/new.sql", "proj/models/old.sql",
        "proj/models/renamed.sql", "proj/models/stg.sql", "proj/sql/new_macro.sql",
    )  # fmt: skip
    changed = git(repo, "diff", "--no-renames", "--name-status", head, snap.commit).splitlines()
    assert sorted(changed) == sorted([
        "M\tproj/models/mart.sql", "A\tproj/models/new.sql", "D\tproj/models/old.sql",
        "A\tproj/models/renamed.sql", "M\tproj/models/stg.sql", "A\tproj/sql/new_macro.sql",
    ])  # fmt: skip
    # the working tree's text, not the index's, for the file staged then edited again
    shown = git(repo, "show", f"{snap.commit}:proj/models/mart.sql")
    assert shown == "select id, full_name from {{ ref('stg') }}"
    # the user's staged version stays staged
    assert git(repo, "show", ":proj/models/mart.sql") == "select id from {{ ref('stg') }}"


def test_the_same_work_is_the_same_snapshot(repo: Path) -> None:
    edit_everything(repo)
    head = git(repo, "rev-parse", "HEAD")
    first = snapshot_uncommitted(repo, repo / "proj", head)
    second = snapshot_uncommitted(repo, repo / "proj", head)
    assert first is not None and second is not None and first.commit == second.commit
    (repo / "proj" / "models" / "new.sql").write_text("select 33 as id\n")
    third = snapshot_uncommitted(repo, repo / "proj", head)
    assert third is not None and third.commit != first.commit


def test_a_clean_checkout_has_no_snapshot(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    (repo / "proj" / "notes.txt").write_text("not read by dbt\n")
    (repo / "README").write_text("outside the project\n")
    assert not find_uncommitted(repo, repo / "proj")
    assert snapshot_uncommitted(repo, repo / "proj", head) is None
    # a change undone since (the file rewritten with HEAD's text) is no change either
    stg = repo / "proj" / "models" / "stg.sql"
    text = stg.read_text()
    stg.write_text(text + "-- edit\n")
    work = find_uncommitted(repo, repo / "proj")
    assert work.tracked == ("proj/models/stg.sql",)
    stg.write_text(text)
    assert take_snapshot(repo, head, work) is None


def test_a_tracked_profile_with_a_new_password_is_never_snapshotted(tmp_path: Path) -> None:
    """The profile holds credentials: a fix branch on the snapshot would keep them in git."""
    root = tmp_path / "r"
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: p\n")
    (root / "models" / "a.sql").write_text("select 1\n")
    (root / "profiles.yml").write_text("p: {outputs: {dev: {type: duckdb}}}\n")
    git(root, "init", "-q", "-b", "main")
    head = commit_all(root, "initial")
    (root / "profiles.yml").write_text("p: {outputs: {prod: {password: s3cret-planted}}}\n")
    assert not find_uncommitted(root, root)  # only the profile changed: nothing to heal on
    (root / "models" / "a.sql").write_text("select 2\n")
    snap = snapshot_uncommitted(root, root, head)
    assert snap is not None and snap.files == ("models/a.sql",)
    assert "s3cret-planted" not in git(root, "show", f"{snap.commit}:profiles.yml")


def test_a_project_at_the_repository_root(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: p\n")
    (root / "models" / "a.sql").write_text("select 1\n")
    git(root, "init", "-q", "-b", "main")
    head = commit_all(root, "initial")
    (root / "models" / "b.sql").write_text("select 2\n")
    (root / "packages.yml").write_text("packages: []\n")
    (root / "target").mkdir()
    (root / "target" / "x.sql").write_text("select 3\n")
    snap = snapshot_uncommitted(root, root, head)
    assert snap is not None and snap.files == ("models/b.sql", "packages.yml")


def test_the_scratch_index_is_never_the_users(repo: Path) -> None:
    edit_everything(repo)
    before = user_state(repo)
    # a GIT_INDEX_FILE inherited from a hook must not redirect (or spare) the user's index
    os.environ["GIT_INDEX_FILE"] = str(repo / ".git" / "index")
    try:
        snap = snapshot_uncommitted(repo, repo / "proj", before[3])
    finally:
        del os.environ["GIT_INDEX_FILE"]
    assert snap is not None and user_state(repo) == before


def test_a_missing_base_is_a_vcs_error(repo: Path) -> None:
    edit_everything(repo)
    with pytest.raises(VcsError):
        snapshot_uncommitted(repo, repo / "proj", "0" * 40)


def test_the_event_carries_the_snapshot(repo: Path) -> None:
    edit_everything(repo)
    head = git(repo, "rev-parse", "HEAD")
    snap = snapshot_uncommitted(repo, repo / "proj", head)
    assert snap is not None
    event = UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="p", unit_id="model.p.mart",
        commit=snap.commit, context={CONTEXT_KEY: snap.as_context()},
    )  # fmt: skip
    again = UniversalFailureEvent.model_validate_json(event.model_dump_json())
    assert snapshot_of(again) == snap
    assert snapshot_of(event.model_copy(update={"context": {}})) is None
    assert "uncommitted work on" in snap.describe() and snap.commit[:12] in snap.describe()

"""Files git knows to be as committed, by blob (fast: real git, no dbt)."""

from __future__ import annotations

from pathlib import Path

from patchit.harnesses.dbt.changes import _checksum, file_checksum
from patchit.harnesses.dbt.clean_files import clean_blobs
from tests.conftest import commit_all, git


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "project" / "models").mkdir(parents=True)
    (repo / "project" / "models" / "a.sql").write_text("select 1\n")
    (repo / "project" / "models" / "b.sql").write_text("select 2\n")
    (repo / "other.txt").write_text("x\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    commit_all(repo, "one")
    return repo


def test_only_tracked_unmodified_files_under_the_project_are_clean(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    project = repo / "project"
    (project / "models" / "b.sql").write_text("select 3\n")  # the candidate's change
    (project / "models" / "new.sql").write_text("select 4\n")  # untracked
    clean = clean_blobs(project)
    assert set(clean) == {"models/a.sql"}
    assert clean["models/a.sql"].endswith(git(repo, "rev-parse", "HEAD:project/models/a.sql"))
    assert clean_blobs(tmp_path / "nowhere") == {}


def test_a_file_changed_in_a_second_worktree_is_hashed_again(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    first = repo / "project" / "models" / "a.sql"
    key = clean_blobs(repo / "project")["models/a.sql"]
    project = str(repo / "project")
    assert _checksum(project, "models/a.sql", key) == file_checksum(first)  # remembered now
    first.write_text("select 'not read again'\n")  # (a test's shortcut: git knows better)
    assert _checksum(project, "models/a.sql", key) != file_checksum(first)
    git(repo, "checkout", "--", "project/models/a.sql")
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(other), "HEAD")
    changed = other / "project" / "models" / "a.sql"
    changed.write_text("select 'changed'\n")
    clean = clean_blobs(other / "project")
    assert "models/a.sql" not in clean
    in_other = str(other / "project")
    assert _checksum(in_other, "models/a.sql", clean.get("models/a.sql")) == file_checksum(changed)
    assert file_checksum(changed) != file_checksum(first)


def test_the_common_git_directory_is_read_as_git_finds_it(tmp_path: Path) -> None:
    from patchit.harnesses.dbt.clean_files import _common_dir

    repo = _repo(tmp_path)
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    for place in (repo, repo / "project", worktree, worktree / "project" / "models"):
        asked = git(place, "rev-parse", "--git-common-dir")
        assert _common_dir(place) == (place / asked).resolve(), place
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / ".git").write_text("not a gitdir line\n")
    assert _common_dir(odd) is None  # git is asked then
    (odd / ".git").write_bytes(b"\xff\xfe")
    assert _common_dir(odd) is None
    assert clean_blobs(odd) == {}  # and git says it is no repository


def test_a_stat_change_alone_leaves_a_file_clean(tmp_path: Path) -> None:
    import os

    repo = _repo(tmp_path)
    a = repo / "project" / "models" / "a.sql"
    os.utime(a, (1, 1))  # the content is the blob's: still clean, by its blob
    (repo / "project" / "models" / "b.sql").unlink()  # deleted: not clean
    assert set(clean_blobs(repo / "project")) == {"models/a.sql"}

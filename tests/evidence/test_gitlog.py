"""git queries on a real repository: history lines and changed files, read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.errors import VcsError
from patchit.evidence.gitlog import changed_files, last_good_on_line, recent_history
from tests.conftest import commit_all, git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "a.sql").write_text("select 1 as id\n")
    (repo / "README.md").write_text("r\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "initial")
    return repo


def test_changed_files_of_a_root_commit_lists_every_file(repo: Path) -> None:
    assert changed_files(repo, None, "HEAD") == ["README.md", "models/a.sql"]


def test_changed_files_since_parent_and_since_a_base(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "models" / "a.sql").write_text("select 2 as id\n")
    commit_all(repo, "a: two")
    (repo / "models" / "b.sql").write_text("select 3 as id\n")
    (repo / "models" / "a.sql").rename(repo / "models" / "c.sql")
    head = commit_all(repo, "b and c")
    assert changed_files(repo, None, head) == ["models/a.sql", "models/b.sql", "models/c.sql"]
    assert changed_files(repo, base, "HEAD") == ["models/a.sql", "models/b.sql", "models/c.sql"]
    assert changed_files(repo, f"{head}~1", f"{head}~1") == []


def test_recent_history_formats_sha_date_author_subject(repo: Path) -> None:
    (repo / "models" / "a.sql").write_text("select 2 as id\n")
    sha = commit_all(repo, "a: switch to two")
    lines = recent_history(repo, ["models/a.sql"], n=5)
    assert len(lines) == 2
    short, date, *rest = lines[0].split(" ")
    assert sha.startswith(short) and len(date) == 10
    assert " ".join(rest) == "Dana Engineer a: switch to two"
    assert recent_history(repo, ["README.md"], n=5)[0].endswith("initial")
    assert recent_history(repo, [], n=5) == []


def test_git_queries_do_not_modify_the_repo_or_run_hooks(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\ntouch hooked\n")
    hook.chmod(0o755)
    before = git(repo, "status", "--porcelain", "--ignored")
    changed_files(repo, None, "HEAD")
    recent_history(repo, ["models/a.sql"])
    assert git(repo, "status", "--porcelain", "--ignored") == before
    assert not (repo / "hooked").exists()


def test_unknown_revision_is_a_vcs_error(repo: Path) -> None:
    with pytest.raises(VcsError, match="no-such-rev"):
        changed_files(repo, "no-such-rev", "HEAD")


def test_a_last_good_commit_is_kept_only_on_the_failing_commits_line(repo: Path) -> None:
    good = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "models" / "f.sql").write_text("select 9 as id\n")
    elsewhere = commit_all(repo, "feature")
    git(repo, "checkout", "-q", "main")
    (repo / "models" / "a.sql").write_text("select 2 as id\n")
    failing = commit_all(repo, "a: two")
    assert last_good_on_line(repo, good, failing) == good
    assert last_good_on_line(repo, failing, failing) == failing
    assert last_good_on_line(repo, elsewhere, failing) is None  # another branch's green run
    assert last_good_on_line(repo, None, failing) is None

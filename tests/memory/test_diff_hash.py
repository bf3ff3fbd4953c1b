"""Unified diffs of edits, and the normalised diff hash the memory compares."""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchit.memory.diffs import diff_hash, normalise_diff
from patchit.patching.diffs import unified_diff
from tests.conftest import commit_all, git

BEFORE = "-- orders\nselect\n    id,\n    nme\nfrom x\n"
AFTER = "-- orders\nselect\n    id,\n    name\nfrom x\n"


def test_unified_diff_applies_with_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models/o.sql").write_text(BEFORE)
    (repo / "models/tail.sql").write_text("select 1\nfrom y")  # no final newline
    git(repo, "init", "-q")
    commit_all(repo, "init")
    patch = unified_diff("models/o.sql", BEFORE, AFTER) + unified_diff(
        "models/tail.sql", "select 1\nfrom y", "select 2\nfrom y"
    )
    assert patch.startswith("--- a/models/o.sql\n+++ b/models/o.sql\n@@ ")
    (tmp_path / "p.diff").write_text(patch)
    git(repo, "apply", "--check", str(tmp_path / "p.diff"))
    git(repo, "apply", str(tmp_path / "p.diff"))
    assert (repo / "models/o.sql").read_text() == AFTER
    assert (repo / "models/tail.sql").read_text() == "select 2\nfrom y"


def test_unified_diff_of_no_change_is_empty() -> None:
    assert unified_diff("a.sql", BEFORE, BEFORE) == ""
    assert normalise_diff("") == ""


def test_same_change_elsewhere_in_the_file_hashes_the_same(tmp_path: Path) -> None:
    shifted_before = "-- header\n-- more\n" + BEFORE
    shifted_after = "-- header\n-- more\n" + AFTER
    plain = unified_diff("models/o.sql", BEFORE, AFTER)
    shifted = unified_diff("models/o.sql", shifted_before, shifted_after, context_lines=1)
    assert plain != shifted
    assert diff_hash(plain) == diff_hash(shifted)


def test_git_headers_and_timestamps_do_not_matter(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "o.sql").write_text(BEFORE)
    git(repo, "init", "-q")
    commit_all(repo, "init")
    (repo / "o.sql").write_text(AFTER)
    from_git = git(repo, "diff")
    assert from_git.startswith("diff --git") and "\nindex " in from_git
    stamped = unified_diff("o.sql", BEFORE, AFTER).replace(
        "+++ b/o.sql", "+++ b/o.sql\t2026-11-25 10:00:00.000 +0000"
    )
    assert (
        diff_hash(from_git) == diff_hash(stamped) == diff_hash(unified_diff("o.sql", BEFORE, AFTER))
    )


def test_whitespace_and_blank_line_changes_are_ignored() -> None:
    noisy_after = AFTER.replace("    name\n", "    name   \n\n").replace("from x\n", "from x\n\n")
    noisy_before = BEFORE.replace("    id,\n", "    id,  \n")
    assert diff_hash(unified_diff("o.sql", BEFORE, AFTER)) == diff_hash(
        unified_diff("o.sql", noisy_before, noisy_after)
    )
    assert normalise_diff(unified_diff("o.sql", BEFORE, BEFORE + "\n\n")) == ""


def test_different_changes_hash_differently() -> None:
    base = unified_diff("o.sql", BEFORE, AFTER)
    assert diff_hash(base) != diff_hash(unified_diff("o.sql", BEFORE, AFTER.replace("name", "nm")))
    assert diff_hash(base) != diff_hash(unified_diff("p.sql", BEFORE, AFTER))


def test_removed_sql_comment_is_a_change_not_a_header() -> None:
    drop_comment = unified_diff("o.sql", BEFORE, BEFORE.replace("-- orders\n", ""))
    assert "\n--- orders\n" in drop_comment
    assert normalise_diff(drop_comment) == "file o.sql\n--- orders\n"


def test_diff_of_a_real_git_diff_command_runs(tmp_path: Path) -> None:
    # git diff --no-index between two plain files: absolute headers, still one change
    (tmp_path / "a.sql").write_text(BEFORE)
    (tmp_path / "b.sql").write_text(AFTER)
    out = subprocess.run(
        ["git", "diff", "--no-index", "a.sql", "b.sql"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    ).stdout
    assert normalise_diff(out) == "file b.sql\n-    nme\n+    name\n"

"""What the breaking diff meant: kept vs repaired lines, on real git history."""

from __future__ import annotations

from pathlib import Path

from patchit.fidelity.meant import (
    ALL,
    breaking_diff,
    line_columns,
    parse_diff,
    patch_added_lines,
    patch_removed_lines,
)
from tests.conftest import commit_all, git

MODEL = "models/orders.sql"
BASE = """select
    o.order_id,
    o.order_date,
    coalesce(p.amount, 0) as amount,
    o.status
from orders o
where o.status <> 'void'
"""


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / MODEL).write_text(BASE)
    git(repo, "init", "-q", "-b", "main")
    return repo, commit_all(repo, "base")


def _break(repo: Path, *edits: tuple[str, str]) -> str:
    text = BASE
    for old, new in edits:
        text = text.replace(old, new)
    (repo / MODEL).write_text(text)
    return commit_all(repo, "break")


def _patched(repo: Path, failing: str, old: str, new: str, tmp_path: Path) -> Path:
    """A worktree at the failing commit with an uncommitted fix, as the loop makes it."""
    tree = tmp_path / "candidate"
    git(repo, "worktree", "add", "--detach", "-q", str(tree), failing)
    (tree / MODEL).write_text((tree / MODEL).read_text().replace(old, new))
    return tree


COLUMNS = {"order_id", "order_date", "amount", "status"}


def test_the_repaired_line_means_nothing_and_the_kept_one_names_its_column(
    tmp_path: Path,
) -> None:
    repo, base = _repo(tmp_path)
    failing = _break(
        repo, ("o.order_date,", "o.order_dat,"), ("p.amount, 0) as", "p.amount, 0) * 100 as")
    )
    tree = _patched(repo, failing, "o.order_dat,", "o.order_date,", tmp_path)
    removed = patch_removed_lines(tree)
    assert removed == {MODEL: {"o.order_dat,"}}
    meant = breaking_diff(repo, base, failing, removed)
    assert meant.repaired[MODEL] == ["    o.order_dat,"]
    assert meant.columns(MODEL, COLUMNS) == ["amount"]
    assert meant.columns("models/other.sql", COLUMNS) == []


def test_a_fix_of_the_only_changed_line_leaves_nothing_meant(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    failing = _break(repo, ("p.amount, 0)", "p.amont, 0)"))
    tree = _patched(repo, failing, "p.amont, 0)", "p.card_amount, 0)", tmp_path)
    meant = breaking_diff(repo, base, failing, patch_removed_lines(tree))
    assert meant.columns(MODEL, COLUMNS) == []  # so a changed `amount` is unexpected


def test_a_new_item_the_fix_only_gave_its_comma_is_still_meant(tmp_path: Path) -> None:
    # jaffle-shop's stg_locations: a new item written without its trailing comma; the comma
    # goes on that very line, and the column it adds is what the change meant
    repo, base = _repo(tmp_path)
    failing = _break(repo, ("    o.status\n", "    upper(o.status) as status_code\n    o.status\n"))
    tree = _patched(repo, failing, "as status_code\n", "as status_code,\n", tmp_path)
    meant = breaking_diff(repo, base, failing, patch_removed_lines(tree), patch_added_lines(tree))
    assert meant.repaired[MODEL] == []
    assert meant.columns(MODEL, COLUMNS | {"status_code"}) == ["status_code"]


def test_a_change_to_which_rows_there_are_means_the_whole_relation(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    # the filter names `status`, but changes every column's values by dropping rows
    failing = _break(repo, ("'void'", "'voided'"))
    assert breaking_diff(repo, base, failing, {}).columns(MODEL, COLUMNS) == [ALL]


def test_select_items_name_the_column_they_define() -> None:
    cols = {c: c for c in COLUMNS}
    assert line_columns("coalesce(p.amount, 0) * 100 as amount,", cols) == {"amount"}
    assert line_columns("o.status", cols) == {"status"}
    assert line_columns('p.amount_cents / 100.0 AS "amount",', cols) == {"amount"}
    assert line_columns("when status = 'x' then order_id", cols) == {"status", "order_id"}
    assert line_columns("left join payments p using (order_id)", cols) is None
    assert line_columns("and o.flag", cols) is None
    assert line_columns("nothing_known + 1", cols) is None


def test_parse_diff_reads_hunks_per_file() -> None:
    text = (
        "diff --git a/x.sql b/x.sql\n--- a/x.sql\n+++ b/x.sql\n@@ -1 +1 @@\n-old\n+new\n"
        "@@ -5,0 +6 @@\n+added\n"
        "diff --git a/gone.sql b/gone.sql\n--- a/gone.sql\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    )
    files = parse_diff(text)
    assert [(h.removed, h.added) for h in files["x.sql"]] == [(["old"], ["new"]), ([], ["added"])]
    assert [(h.removed, h.added) for h in files["gone.sql"]] == [(["bye"], [])]

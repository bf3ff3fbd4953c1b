"""A model the change renamed is a meant difference of the data check, not "missing in
candidate": its relation is compared with the old one's (issue 28, item 8). Real git, real
DuckDB files as two runs leave them."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.fidelity.dbt_check import compare_runs, judge
from patchit.fidelity.meant import breaking_diff
from patchit.fidelity.outputs import BuiltNode, DbtOutputs
from tests.conftest import commit_all, git

OLD = "models/int_orders.sql"
NEW = "models/int_paid_orders.sql"
SQL = "select order_id, amount\nfrom orders\n"


def _renamed_repo(tmp_path: Path, edit: str = "") -> tuple[Path, str, str]:
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / OLD).write_text(SQL)
    git(repo, "init", "-q", "-b", "main")
    base = commit_all(repo, "base")
    git(repo, "mv", OLD, NEW)
    if edit:
        (repo / NEW).write_text(SQL.replace("from orders", edit))
    return repo, base, commit_all(repo, "int_orders is int_paid_orders")


def _run(path: Path, table: str, rows: str) -> DbtOutputs:
    with duckdb.connect(str(path)) as con:
        con.execute(f"create table {table} as select * from (values {rows}) t(order_id, amount)")
    file = OLD if table == "int_orders" else NEW
    node = BuiltNode(f"model.shop.{table}", "main", table, SQL, file, [])
    return DbtOutputs(duckdb=path, nodes={node.unique_id: node})


def test_the_renamed_model_is_compared_with_its_old_relation(tmp_path: Path) -> None:
    repo, base, head = _renamed_repo(tmp_path)
    meant = breaking_diff(repo, base, head, {})
    assert meant.renamed == {OLD: NEW} and meant.kept[NEW] == []
    before = _run(tmp_path / "base.duckdb", "int_orders", "(1, 5), (2, 7)")
    same = _run(tmp_path / "same.duckdb", "int_paid_orders", "(1, 5), (2, 7)")
    compared = compare_runs(before, same, meant.renamed)
    assert list(compared) == ["model.shop.int_paid_orders"]
    [out], _ = judge(compared, {}, meant)
    assert (out.verdict, out.missing_in, out.renamed_from) == ("same", None, "int_orders")

    # a renamed model whose rows changed where the change did not mean it: still caught
    wrong = _run(tmp_path / "wrong.duckdb", "int_paid_orders", "(1, 5), (2, 9)")
    [out], _ = judge(compare_runs(before, wrong, meant.renamed), {}, meant)
    assert out.verdict == "unexpected" and out.unexpected == ["amount"]

    # without the rename known, the two relations are each missing on one side (the old way)
    unpaired = compare_runs(before, same, {})
    assert {c.raw.label for c in unpaired.values()} == {"main.int_orders", "main.int_paid_orders"}


def test_what_the_change_meant_in_the_renamed_file_is_its_diff_to_the_old(tmp_path: Path) -> None:
    repo, base, head = _renamed_repo(tmp_path, "from orders\nwhere amount > 0")
    meant = breaking_diff(repo, base, head, {})
    assert meant.renamed == {OLD: NEW}
    assert meant.kept[NEW] == ["where amount > 0"] and OLD not in meant.kept

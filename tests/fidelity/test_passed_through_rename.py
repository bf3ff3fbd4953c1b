"""A column the change renamed, carried on by a model that selects `*` from the renamed one
(jaffle-shop's `orders` over `stg_orders`): the data check reads the pass-through model's
new column, holding the old one's very values, as the rename's meant difference, not as an
unexpected one. Real git, real DuckDB files as two runs leave them."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.fidelity.dbt_check import compare_runs, judge
from patchit.fidelity.meant import breaking_diff
from patchit.fidelity.outputs import BuiltNode, DbtOutputs
from tests.conftest import commit_all, git

STG = "models/stg_orders.sql"
ORDERS = "models/orders.sql"


def _repo(tmp_path: Path) -> tuple[Path, str, str]:
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / STG).write_text("select\n    id as order_id,\n    customer as customer_id\nfrom raw\n")
    (repo / ORDERS).write_text("select * from {{ ref('stg_orders') }}\n")
    git(repo, "init", "-q", "-b", "main")
    base = commit_all(repo, "base")
    (repo / STG).write_text((repo / STG).read_text().replace("as customer_id", "as buyer_id"))
    return repo, base, commit_all(repo, "stg_orders: the customer is the buyer")


def _run(path: Path, columns: str, rows: str) -> DbtOutputs:
    with duckdb.connect(str(path)) as con:
        con.execute(f"create table orders as select * from (values {rows}) t({columns})")
    node = BuiltNode("model.shop.orders", "main", "orders", "select 1", ORDERS, [])
    return DbtOutputs(duckdb=path, nodes={node.unique_id: node})


def test_a_rename_carried_through_a_star_model_is_meant(tmp_path: Path) -> None:
    repo, base, head = _repo(tmp_path)
    meant = breaking_diff(repo, base, head, {})
    before = _run(tmp_path / "base.duckdb", "order_id, customer_id", "(1, 7), (2, 8)")
    carried = _run(tmp_path / "carried.duckdb", "order_id, buyer_id", "(1, 7), (2, 8)")
    [out], _ = judge(compare_runs(before, carried, {}), {}, meant)
    assert out.verdict == "meant", out
    assert out.renamed == ["customer_id -> buyer_id"]

    # the new name holding other values is not the rename carried on
    wrong = _run(tmp_path / "wrong.duckdb", "order_id, buyer_id", "(1, 7), (2, 9)")
    [out], _ = judge(compare_runs(before, wrong, {}), {}, meant)
    assert out.verdict == "unexpected"

    # nor is a rename the change did not write
    other = _run(tmp_path / "other.duckdb", "id, customer_id", "(1, 7), (2, 8)")
    [out], _ = judge(compare_runs(before, other, {}), {}, meant)
    assert out.verdict == "unexpected"

"""A relation built from the same SQL and config over the same inputs in both runs, whose
values still differ, differs by the run itself (ties in a window, float sums added in
another order), not by the candidate: excluded as unstable, never "needs review". Found on a
public 450-model project (DataRecce/jaffle-shop-expand): a right 27-file macro-rename fix was
escalated because a nearest-store pick over ties and float sums differed from the baseline.
Real DuckDB files as two runs leave them."""

from __future__ import annotations

from pathlib import Path

import duckdb

from patchit.fidelity.dbt_check import compare_runs, edits_only_code, has_run_hooks, judge
from patchit.fidelity.meant import Meant
from patchit.fidelity.outputs import BuiltNode, DbtOutputs, config_text

PARENT = "model.shop.stg_stores"
CHILD = "model.shop.nearest_store"
CHILD_SQL = "select customer_id, first(store_id) as store_id from stg_stores group by 1"
TABLE = {"materialized": "table"}


def _run(
    path: Path,
    stores: str,
    picks: str,
    child_config: dict[str, str] = TABLE,
    parent_sql: str = "select * from raw_stores",
) -> DbtOutputs:
    with duckdb.connect(str(path)) as con:
        con.execute(f"create table stg_stores as select * from (values {stores}) t(store_id, km)")
        con.execute(
            f"create table nearest_store as select * from (values {picks}) t(customer_id, store_id)"
        )
    parent = BuiltNode(PARENT, "main", "stg_stores", parent_sql, "models/stg_stores.sql", [],
                       config_text(TABLE))  # fmt: skip
    child = BuiltNode(CHILD, "main", "nearest_store", CHILD_SQL, "models/nearest_store.sql",
                      [PARENT], config_text(child_config))  # fmt: skip
    return DbtOutputs(duckdb=path, nodes={PARENT: parent, CHILD: child})


def _verdicts(base: DbtOutputs, cand: DbtOutputs, code_only: bool = True) -> dict[str, str]:
    outs, _ = judge(compare_runs(base, cand), {}, Meant(), code_only)
    return {out.name: out.verdict for out in outs}


def test_same_code_over_same_inputs_is_the_runs_own_difference(tmp_path: Path) -> None:
    stores = "(1, 2.5), (2, 2.5)"  # a tie: either store is nearest
    base = _run(tmp_path / "base.duckdb", stores, "(7, 1)")
    cand = _run(tmp_path / "cand.duckdb", stores, "(7, 2)")
    outs, _ = judge(compare_runs(base, cand), {}, Meant(), True)
    [child] = [o for o in outs if o.unique_id == CHILD]
    assert (child.verdict, child.nondeterministic) == ("unstable", True)
    assert child.unstable == ["store_id"]
    assert not child.unexpected

    # a candidate that edits more than dbt code (a file a model reads by path): not excluded
    assert _verdicts(base, cand, code_only=False)["main.nearest_store"] == "unexpected"


def test_a_difference_upstream_or_in_config_is_still_judged(tmp_path: Path) -> None:
    base = _run(tmp_path / "base.duckdb", "(1, 2.5), (2, 3.0)", "(7, 1)")
    # the candidate edited the parent, which now differs where nothing meant it to: the
    # child's difference is not its own
    moved = _run(tmp_path / "moved.duckdb", "(1, 4.0), (2, 3.0)", "(7, 2)",
                 parent_sql="select store_id, km + 1.5 as km from raw_stores")  # fmt: skip
    assert _verdicts(base, moved) == {"main.stg_stores": "unexpected",
                                      "main.nearest_store": "unexpected"}  # fmt: skip
    # the same SQL under another config (a hook, a materialization): not the same build
    hooked = _run(tmp_path / "hooked.duckdb", "(1, 2.5), (2, 3.0)", "(7, 2)",
                  {"materialized": "table", "post_hook": "delete from {{ this }}"})  # fmt: skip
    assert _verdicts(base, hooked)["main.nearest_store"] == "unexpected"
    # hooks in both runs' config: SQL the compiled code does not show (a macro the fix edits)
    hook = {"materialized": "table", "post_hook": "{{ tidy(this) }}"}
    base_hooked = _run(tmp_path / "base_hooked.duckdb", "(1, 2.5), (2, 3.0)", "(7, 1)", hook)
    cand_hooked = _run(tmp_path / "cand_hooked.duckdb", "(1, 2.5), (2, 3.0)", "(7, 2)", hook)
    assert _verdicts(base_hooked, cand_hooked)["main.nearest_store"] == "unexpected"
    # other rows (not only other values) from the same code and inputs: the run's own too
    more = _run(tmp_path / "more.duckdb", "(1, 2.5), (2, 3.0)", "(7, 1), (8, 1)")
    assert _verdicts(base, more)["main.nearest_store"] == "unstable"


def test_only_dbt_code_edits_and_no_run_hooks_allow_it(tmp_path: Path) -> None:
    assert edits_only_code({"models/a.sql": [], "models/schema.yml": [], "docs/a.md": []})
    assert edits_only_code({})
    for other in ("data/stores.csv", "models/py_model.py", "dbt_project.yml", "Makefile"):
        assert not edits_only_code({"models/a.sql": [], other: []}), other
    (tmp_path / "dbt_project.yml").write_text("name: shop\nmodels:\n  shop: {}\n")
    assert not has_run_hooks(tmp_path)
    (tmp_path / "dbt_project.yml").write_text("name: shop\non-run-start:\n  - '{{ seed_raw() }}'\n")
    assert has_run_hooks(tmp_path)
    assert has_run_hooks(tmp_path / "missing")


def test_a_config_reads_the_same_from_the_manifest_and_the_warm_worker() -> None:
    # the manifest writes unset keys as null, at any depth; the warm worker leaves them out
    manifest = {"materialized": "table", "docs": {"node_color": None, "show": True}, "tags": []}
    worker = {"docs": {"show": True}, "materialized": "table"}
    assert config_text(manifest) == config_text(worker)
    assert config_text(manifest) != config_text({**worker, "post_hook": ["delete"]})

"""What the data check could not judge: outputs the baseline has nothing to compare with
(new columns, new relations), named in its summary and in the fix's confidence."""

from __future__ import annotations

from patchit.fidelity.model import DataCheck, OutputDiff
from patchit.reports.confidence import fix_confidence


def _check(*outputs: OutputDiff, status: str = "differs") -> DataCheck:
    return DataCheck(status=status, kind="dbt", outputs=list(outputs))  # type: ignore[arg-type]


FCT = OutputDiff(
    name="main.fct_invoices",
    schema_changes=["+ship_city VARCHAR", "+bill_city VARCHAR", "~net_usd DECIMAL -> DOUBLE"],
    meant=["ship_city", "bill_city"],
    verdict="meant",
)
NEW_RELATION = OutputDiff(name="main.dim_addresses", missing_in="baseline", verdict="meant")
SAME = OutputDiff(name="main.revenue_by_country")


def test_new_columns_and_relations_are_named_as_unjudged() -> None:
    check = _check(FCT, NEW_RELATION, SAME)
    assert check.new_outputs() == [
        "main.fct_invoices.ship_city",
        "main.fct_invoices.bill_city",
        "main.dim_addresses",
    ]
    assert check.unjudged() == (
        "the data check could not judge: main.fct_invoices.ship_city, "
        "main.fct_invoices.bill_city, main.dim_addresses are new"
    )
    assert check.unjudged(most=1).endswith("ship_city and 2 more are new")


def test_a_check_that_compared_everything_judged_everything() -> None:
    dropped = OutputDiff(name="main.orders", schema_changes=["-amount DOUBLE"], verdict="meant")
    assert _check(SAME, dropped).unjudged() == ""
    assert _check(status="not_run").unjudged() == ""


def _confidence(check: DataCheck) -> tuple[float, list[str]]:
    found = fix_confidence(
        signature="duckdb_binder_column", strategy="duckdb_rename_column", tier=0,
        fidelity="runtime", data_check=check, passing=1,
    )  # fmt: skip
    return found.score, found.signals


def test_confidence_says_what_the_data_check_could_not_judge() -> None:
    judged, signals = _confidence(_check(SAME, status="same"))
    assert judged == 1.0 and not any("could not judge" in s for s in signals)
    unjudged, signals = _confidence(_check(FCT))
    assert unjudged == 0.8
    assert (
        "the data check could not judge: main.fct_invoices.ship_city, "
        "main.fct_invoices.bill_city are new (x0.80)"
    ) in signals


def test_one_new_output_is_new() -> None:
    assert _check(NEW_RELATION).unjudged() == (
        "the data check could not judge: main.dim_addresses is new"
    )


def test_a_renamed_column_compared_with_its_old_name_is_judged_not_new() -> None:
    renamed = OutputDiff(
        name="main.stg_orders",
        schema_changes=["-ordered_at DATE", "+order_date DATE", "+note VARCHAR"],
        renamed=["ordered_at -> order_date"],
        verdict="meant",
    )
    assert _check(renamed).new_outputs() == ["main.stg_orders.note"]
    assert "renamed, same values: ordered_at -> order_date" in _check(renamed).markdown()


def test_a_rename_is_read_only_where_the_change_wrote_the_new_name() -> None:
    from patchit.fidelity.dbt_check import Compared, judge
    from patchit.fidelity.dbt_data import RawDiff, TableStats
    from patchit.fidelity.meant import Meant
    from patchit.fidelity.outputs import BuiltNode

    node = BuiltNode("model.shop.stg_orders", "main", "stg_orders", "", "models/stg.sql", [])
    base = TableStats({"id": "INTEGER", "ordered_at": "DATE"}, 3, {"id": 1, "ordered_at": 7})
    cand = TableStats({"id": "INTEGER", "order_date": "DATE"}, 3, {"id": 1, "order_date": 7})
    raw = RawDiff.of("main", "stg_orders", base, cand)
    compared = {node.unique_id: Compared(node, node, node, raw)}
    wrote = Meant(kept={"models/stg.sql": ["cast(order_date as date) as order_date,"]})
    (out,), _ = judge(compared, {}, wrote)
    assert out.renamed == ["ordered_at -> order_date"]
    (other,), _ = judge(compared, {}, Meant(kept={"models/other.sql": ["select 1"]}))
    assert other.renamed == []

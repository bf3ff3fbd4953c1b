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

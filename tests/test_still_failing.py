"""A candidate that made progress says so: the attempt's reason names the error the unit
fails with now (found trying jaffle_shop_duckdb: the ref fix for a renamed model worked, and
`orders` then stopped on a column an earlier commit removed; the reason read as the same
failure, five ids long)."""

from __future__ import annotations

from patchit.evidence.intents import Intent
from patchit.harnesses.base import Verification
from patchit.loop.still_failing import meant_by_the_change, now_failing_with, still_failing

# the tail of a real `dbt build` (dbt-duckdb 1.9) in a candidate's sandbox
OUTPUT = """\
07:21:22  12 of 12 SKIP test unique_orders_order_id ....................... [SKIP]
07:21:22  Completed with 2 errors, 0 partial successes, and 0 warnings:
07:21:22
07:21:22  Failure in model orders (models/orders.sql)
07:21:22    Runtime Error in model orders (models/orders.sql)
  Binder Error: Referenced column "payment_method" not found in FROM clause!
  Candidate bindings: "payment_id", "amount", "order_id"
07:21:22
07:21:22  Failure in test not_null_customers_first_name (models/schema.yml)
07:21:22    Got 3 results, configured to fail if != 0
"""
ORDERS = "model.jaffle_shop.orders"
TESTS = [f"test.jaffle_shop.not_null_orders_{c}.a1b2c3" for c in "abcdef"]


def _failed(failures: list[str], output: str = OUTPUT) -> Verification:
    return Verification(passed=False, harness="dbt", command="dbt build", output=output,
                        failures=failures)  # fmt: skip


def test_the_first_unit_is_said_with_the_error_it_fails_with_now() -> None:
    assert now_failing_with(OUTPUT, ORDERS) == (
        'Binder Error: Referenced column "payment_method" not found in FROM clause!'
    )
    test = "test.jaffle_shop.not_null_customers_first_name.9f8e7d"
    assert now_failing_with(OUTPUT, test) == "Got 3 results, configured to fail if != 0"
    reason = still_failing(_failed([ORDERS, *TESTS]))
    assert reason == (
        f'still failing: {ORDERS} (Binder Error: Referenced column "payment_method" not found '
        f"in FROM clause!), {', '.join(TESTS[:4])} and 2 more"
    )


def test_an_output_that_does_not_say_leaves_the_ids_alone() -> None:
    assert now_failing_with(OUTPUT, "model.jaffle_shop.customers") is None
    assert now_failing_with("", ORDERS) is None
    assert still_failing(_failed(["etl.load_orders"], "Traceback ...\nKeyError: 'amout'")) == (
        "still failing: etl.load_orders"
    )
    long = OUTPUT.replace("Binder Error:", "Binder Error: " + "x" * 300)
    assert len(now_failing_with(long, ORDERS) or "") == 160


def test_an_error_on_what_the_change_removed_says_so() -> None:
    removed = Intent(kind="column_removed", path="models/staging/stg_payments.sql",
                     old="payment_method",
                     description="removed column payment_method from stg_payments")  # fmt: skip
    renamed = Intent(kind="model_renamed", path="models/staging/stg_sales_orders.sql",
                     old="stg_orders", new="stg_sales_orders",
                     description="renamed model stg_orders to stg_sales_orders")  # fmt: skip
    result = _failed([ORDERS, *TESTS])
    assert meant_by_the_change(result, [renamed, removed]) == (
        "; payment_method is what the change meant: removed column payment_method from stg_payments"
    )
    # a name only in the units' ids, or an output that does not say: nothing to add
    assert meant_by_the_change(result, [renamed]) == ""
    assert meant_by_the_change(_failed([ORDERS], "boom"), [removed]) == ""

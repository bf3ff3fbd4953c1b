import pytest

from patchit.evidence.similarity import DEFAULT_MIN_RATIO, name_ratio, nearest


@pytest.mark.parametrize(
    ("name", "candidates", "expected"),
    [
        ("nme", ["name", "o.order_date", "id"], "name"),
        ("amout", ["amount", "status"], "amount"),
        ("Order_Date", ["order_date", "order_id"], "order_date"),
        ("stg_order", ["stg_orders", "orders", "stg_customers"], "stg_orders"),
        ("cents_to_dolars", ["cents_to_dollars", "ref", "source"], "cents_to_dollars"),
    ],
)
def test_nearest_finds_the_one_near_name(name: str, candidates: list[str], expected: str) -> None:
    assert nearest(name, candidates) == expected


def test_nearest_refuses_a_tie() -> None:
    # "orders" is as near to the staging model as to the seed: picking one is a guess
    assert name_ratio("orders", "stg_orders") == name_ratio("orders", "raw_orders")
    assert nearest("orders", ["stg_orders", "raw_orders"]) is None


def test_nearest_refuses_below_the_bar() -> None:
    assert name_ratio("stg_payments", "raw_payments") < DEFAULT_MIN_RATIO
    assert nearest("stg_payments", ["raw_payments", "order_payments"]) is None
    assert nearest("daily_revenue", ["order_payments"]) is None
    assert nearest("x", []) is None


def test_nearest_ignores_the_name_itself_and_duplicates() -> None:
    assert nearest("status", ["status", "stauts"]) == "stauts"
    assert nearest("nme", ["name", "name"]) == "name"
    assert nearest("stg_payments", ["raw_payments"], min_ratio=0.7) == "raw_payments"

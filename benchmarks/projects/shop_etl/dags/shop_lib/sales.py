"""Sales maths: typed order and refund rows, totals per store, stock to reorder."""

from __future__ import annotations


def parse_order(row: dict[str, str]) -> dict[str, object]:
    """A landing order line with typed quantities and prices (cents)."""
    return {
        "order_id": int(row["order_id"]),
        "store": row["store"],
        "sku": row["sku"],
        "quantity": int(row["quantity"]),
        "unit_price_cents": int(row["unit_price_cents"]),
    }


def parse_refund(row: dict[str, str]) -> dict[str, object]:
    return {"order_id": int(row["order_id"]), "amount_cents": int(row["amount_cents"])}


def line_total(order: dict[str, object]) -> int:
    return int(order["quantity"]) * int(order["unit_price_cents"])


def store_totals(
    orders: list[dict[str, object]], refunds: list[dict[str, object]]
) -> dict[str, dict[str, int]]:
    """Gross sales, refunds, net and orders per store, in cents."""
    store_of = {int(o["order_id"]): str(o["store"]) for o in orders}
    totals: dict[str, dict[str, int]] = {}
    for order in orders:
        store = totals.setdefault(str(order["store"]), {"gross": 0, "refunds": 0, "orders": 0})
        store["gross"] += line_total(order)
    for store_name in store_of.values():
        totals[store_name]["orders"] += 1
    for refund in refunds:
        totals[store_of[int(refund["order_id"])]]["refunds"] += int(refund["amount_cents"])
    for store in totals.values():
        store["net"] = store["gross"] - store["refunds"]
    return totals


def units_sold(orders: list[dict[str, object]]) -> dict[str, int]:
    """Units sold per store and SKU, keyed `store/sku`."""
    sold: dict[str, int] = {}
    for order in orders:
        key = f"{order['store']}/{order['sku']}"
        sold[key] = sold.get(key, 0) + int(order["quantity"])
    return sold


def to_reorder(stock: dict[str, int], sold: dict[str, int], minimum: int = 5) -> dict[str, int]:
    """How many to order per `store/sku` to be back at `minimum` after today's sales."""
    reorder = {}
    for key, on_hand in sorted(stock.items()):
        left = on_hand - sold.get(key, 0)
        if left < minimum:
            reorder[key] = minimum - left
    return reorder

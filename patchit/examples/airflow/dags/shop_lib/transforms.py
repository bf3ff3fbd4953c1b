"""Order transformations used by the `shop_orders` DAG."""

from __future__ import annotations

import json
import os
from pathlib import Path

OUTPUT_ROOT = Path(os.environ.get("SHOP_OUTPUT_DIR", Path(__file__).resolve().parents[2] / "output"))


def raw_orders() -> list[dict]:
    return [
        {"order_id": 1, "customer": "ada", "amount_cents": 1250, "status": "shipped"},
        {"order_id": 2, "customer": "grace", "amount_cents": 4999, "status": "placed"},
        {"order_id": 3, "customer": "ada", "amount_cents": 300, "status": "returned"},
    ]


def revenue_by_customer(orders: list[dict]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for order in orders:
        if order["status"] == "returned":
            continue
        totals[order["customer"]] = totals.get(order["customer"], 0) + order["amount_cents"]
    return totals


def write_json(name: str, payload: object) -> str:
    """Write `payload` to OUTPUT_ROOT/<name>, creating the directory first."""
    path = OUTPUT_ROOT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True))
    return str(path)

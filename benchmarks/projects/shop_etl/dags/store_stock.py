"""Store stock: TaskFlow. Today's stock and units sold, read in parallel, give what each
store must reorder to stay above its minimum."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task
from shop_lib import landing
from shop_lib.sales import parse_order, to_reorder, units_sold

from patchit.integrations.airflow import on_failure_callback


@dag(
    dag_id="store_stock",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"on_failure_callback": on_failure_callback, "retries": 0},
)
def store_stock():
    @task
    def stock_levels(day: str) -> dict[str, int]:
        rows = landing.read_rows("stock", day)
        return {f"{row['store']}/{row['sku']}": int(row["on_hand"]) for row in rows}

    @task
    def sold_today(day: str) -> dict[str, int]:
        return units_sold([parse_order(row) for row in landing.read_rows("orders", day)])

    @task
    def reorder(stock: dict[str, int], sold: dict[str, int], ds=None) -> str:
        return landing.publish("reorder", ds, to_reorder(stock, sold))

    reorder(stock_levels(day="{{ ds }}"), sold_today(day="{{ ds }}"))


store_stock()

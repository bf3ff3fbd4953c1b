"""TaskFlow DAG: extract orders, sum revenue per customer (repo helper module), write a file."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task
from shop_lib.transforms import raw_orders, revenue_by_customer, write_json


@dag(dag_id="shop_orders", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def shop_orders():
    @task
    def extract() -> list[dict]:
        return raw_orders()

    @task
    def summarise(orders: list[dict]) -> dict[str, int]:
        return revenue_by_customer(orders)

    @task
    def publish(totals: dict[str, int]) -> str:
        return write_json("orders/revenue.json", totals)

    publish(summarise(extract()))


shop_orders()

"""Customer summary: classic operators; one JSON file per run with invoice counts per customer."""

from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from etl_lib.io import read_rows, write_json

from patchit.integrations.airflow import on_failure_callback


def summarise(ds: str, **_context: object) -> str:
    counts: dict[str, int] = {}
    for row in read_rows("invoices.csv"):
        counts[row["customer"]] = counts.get(row["customer"], 0) + 1
    return write_json(f"summaries/{ds}/invoices_per_customer.json", counts)


with DAG(
    dag_id="customer_summary",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"on_failure_callback": on_failure_callback, "retries": 0},
):
    start = EmptyOperator(task_id="start")
    summary = PythonOperator(task_id="summarise", python_callable=summarise)
    start >> summary

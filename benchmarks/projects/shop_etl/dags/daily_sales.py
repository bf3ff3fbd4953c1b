"""Daily sales: classic operators with templated fields. The two extracts stage the day's
landing files, summarise totals them per store, archive copies the published file (bash)."""

from __future__ import annotations

from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from shop_lib import landing
from shop_lib.sales import parse_order, parse_refund, store_totals

from patchit.integrations.airflow import on_failure_callback

PARSERS = {"orders": parse_order, "refunds": parse_refund}


def extract(source: str, day: str) -> int:
    rows = [PARSERS[source](row) for row in landing.read_rows(source, day)]
    landing.stage(source, day, rows)
    return len(rows)


def summarise(templates_dict: dict[str, str], **_context: object) -> str:
    day = templates_dict["day"]
    totals = store_totals(landing.staged("orders", day), landing.staged("refunds", day))
    return landing.publish("daily_sales", day, {"day": day, "stores": totals})


with DAG(
    dag_id="daily_sales",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"on_failure_callback": on_failure_callback, "retries": 0},
):
    start = EmptyOperator(task_id="start")
    extract_orders = PythonOperator(
        task_id="extract_orders",
        python_callable=extract,
        op_kwargs={"source": "orders", "day": "{{ ds }}"},
    )
    extract_refunds = PythonOperator(
        task_id="extract_refunds",
        python_callable=extract,
        op_kwargs={"source": "refunds", "day": "{{ ds }}"},
    )
    totals = PythonOperator(
        task_id="summarise",
        python_callable=summarise,
        templates_dict={"day": "{{ ds }}"},
    )
    archive = BashOperator(
        task_id="archive",
        bash_command=(
            'mkdir -p "$OUT/archive/{{ ds }}" && '
            'cp "$OUT/published/{{ ds }}/daily_sales.json" "$OUT/archive/{{ ds }}/"'
        ),
        env={"OUT": str(landing.OUTPUT_DIR)},
        append_env=True,
    )
    start >> [extract_orders, extract_refunds] >> totals >> archive

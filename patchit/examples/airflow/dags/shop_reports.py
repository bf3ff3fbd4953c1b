"""Classic operators: build a daily report from a settings dict and write it as CSV."""

from __future__ import annotations

import csv
import os
from datetime import datetime
from pathlib import Path

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

REPORT_DIR = Path(os.environ.get("SHOP_OUTPUT_DIR", Path(__file__).resolve().parents[1] / "output"))
SETTINGS = {"currency": "EUR", "columns": ["region", "orders"]}


def collect_rows(**context):
    return [{"region": "north", "orders": 12}, {"region": "south", "orders": 7}]


def write_report(ti, **context):
    rows = ti.xcom_pull(task_ids="collect_rows")
    out_dir = REPORT_DIR / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"orders_{context['ds']}_{SETTINGS['currency']}.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=SETTINGS["columns"])
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


with DAG(dag_id="shop_reports", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    collect = PythonOperator(task_id="collect_rows", python_callable=collect_rows)
    report = PythonOperator(task_id="write_report", python_callable=write_report)
    collect >> report

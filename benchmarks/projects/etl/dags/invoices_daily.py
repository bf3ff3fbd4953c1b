"""Daily invoice report: read the landing files, parse invoices, total them per country."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task
from etl_lib.io import read_rows, write_json
from etl_lib.money import parse_invoice, totals_by_country

from patchit.integrations.airflow import on_failure_callback


@dag(
    dag_id="invoices_daily",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"on_failure_callback": on_failure_callback, "retries": 0},
)
def invoices_daily():
    @task
    def extract() -> list[dict[str, object]]:
        return [parse_invoice(row) for row in read_rows("invoices.csv")]

    @task
    def load_rates() -> dict[str, float]:
        return {row["currency"]: float(row["eur_rate"]) for row in read_rows("fx_rates.csv")}

    @task
    def validate(invoices: list[dict[str, object]]) -> list[dict[str, object]]:
        for invoice in invoices:
            if int(invoice["amount_cents"]) < 0:
                raise ValueError(f"invoice {invoice['invoice_id']} has a negative amount")
        return invoices

    @task
    def report(invoices: list[dict[str, object]], rates: dict[str, float], ds=None) -> str:
        totals = totals_by_country(invoices, rates)
        return write_json(f"reports/{ds}/totals_by_country.json", totals)

    report(validate(extract()), load_rates())


invoices_daily()

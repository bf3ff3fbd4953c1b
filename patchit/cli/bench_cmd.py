"""`patchit bench`: measure patchit. `--perf` times verification against re-running dbt;
`--airflow` times the Airflow callback, an alert storm and the Airflow harness."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from patchit.cli.context import say


@click.command()
@click.option("--perf", is_flag=True, help="Time verifying a fix against running dbt by hand.")
@click.option("--airflow", is_flag=True,
              help="Time the Airflow callback per call, a storm of failures into one incident, "
                   "and verifying a DAG fix against `airflow tasks test`. With --perf too, "
                   "both run (dbt first).")  # fmt: skip
@click.option("--models", "n_models", type=click.IntRange(min=6), default=200, show_default=True,
              help="Models in the generated project (--perf).")  # fmt: skip
@click.option("--calls", type=click.IntRange(min=1), default=200, show_default=True,
              help="Callback calls to time (--airflow).")  # fmt: skip
@click.option("--storm", "storm_events", type=click.IntRange(min=1), default=10_000,
              show_default=True, help="Failure events in the alert storm (--airflow).")  # fmt: skip
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each verify measure; medians are reported.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True,
              help='Print the measurements as JSON (with --perf --airflow: {"dbt": ..., '
                   '"airflow": ...}).')  # fmt: skip
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the generated repos here (default: a temp dir, removed); with both "
                   "parts, under dbt/ and airflow/.")  # fmt: skip
def bench(
    perf: bool,
    airflow: bool,
    n_models: int,
    calls: int,
    storm_events: int,
    runs: int,
    as_json: bool,
    workdir: Path | None,
) -> None:
    """Benchmark patchit: `--perf` (dbt) and/or `--airflow`."""
    if not perf and not airflow:
        click.echo(
            "patchit: error: the scenario corpus is not built yet; use --perf or --airflow",
            err=True,
        )
        sys.exit(2)
    both = perf and airflow
    reports: dict[str, str] = {}
    data: dict[str, object] = {}
    if perf:
        from patchit.bench import perf as dbt_perf

        dbt_dir = workdir / "dbt" if both and workdir else workdir
        result = dbt_perf.run_perf(n_models=n_models, runs=runs, workdir=dbt_dir, say=say)
        reports["dbt"], data["dbt"] = dbt_perf.format_report(result), result.to_json()
    if airflow:
        from patchit.bench import perf_airflow

        airflow_dir = workdir / "airflow" if both and workdir else workdir
        measured = perf_airflow.run_airflow_perf(
            calls=calls, storm=storm_events, runs=runs, workdir=airflow_dir, say=say
        )
        reports["airflow"] = perf_airflow.format_report(measured)
        data["airflow"] = measured.to_json()
    if as_json:
        payload = data if both else data["dbt" if perf else "airflow"]
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo("\n\n".join(reports.values()))

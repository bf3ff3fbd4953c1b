"""`patchit bench`: measure patchit. `--perf` times verification against re-running dbt."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from patchit.cli.context import say


@click.command()
@click.option("--perf", is_flag=True, help="Time verifying a fix against running dbt by hand.")
@click.option("--models", "n_models", type=click.IntRange(min=6), default=200, show_default=True,
              help="Models in the generated project.")  # fmt: skip
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each measure; medians are reported.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the measurements as JSON.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the generated repo here (default: a temp dir, removed).")  # fmt: skip
def bench(perf: bool, n_models: int, runs: int, as_json: bool, workdir: Path | None) -> None:
    """Benchmark patchit (only `--perf` for now)."""
    if not perf:
        click.echo("patchit: error: the scenario corpus is not built yet; use --perf", err=True)
        sys.exit(2)
    from patchit.bench.perf import dump_json, format_report, run_perf

    result = run_perf(n_models=n_models, runs=runs, workdir=workdir, say=say)
    click.echo(dump_json(result) if as_json else format_report(result))

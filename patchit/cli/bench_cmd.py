"""`patchit bench`: measure patchit. With no flag, run the scenario corpus (benchmarks/corpus)
and judge every scenario from outside; `--perf` times verification against re-running dbt;
`--airflow` times the Airflow callback, an alert storm and the Airflow harness; `--memory`
times the attempt memory's repeat-diff lookup with a million attempts stored."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from patchit.bench.corpus_model import WAREHOUSES, Warehouse
from patchit.cli.context import say


@click.command()
@click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Scenario corpus (default: benchmarks/corpus of the checkout).")  # fmt: skip
@click.option("--only", multiple=True,
              help="Run only these scenarios (repeat, or a comma list).")  # fmt: skip
@click.option("--results", "results_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the corpus run writes latest.json/.md (subset.* with --only); "
                   "default: benchmarks/results beside the corpus.")  # fmt: skip
@click.option("--warehouse", type=click.Choice(WAREHOUSES), default="duckdb",
              show_default=True,
              help="Where the corpus's dbt scenarios run: postgres (snowflake) runs those that "
                   "make sense there on a throw-away PostgreSQL cluster (Snowflake emulator, "
                   "fakesnow); results latest-<warehouse>.*, beside DuckDB's outcomes from "
                   "latest.json.")  # fmt: skip
@click.option("--memory", "memory_perf", is_flag=True,
              help="Time the repeat-diff lookup with --attempts attempts stored.")  # fmt: skip
@click.option("--attempts", type=click.IntRange(min=1000), default=1_000_000, show_default=True,
              help="Attempts stored in the memory (--memory).")  # fmt: skip
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
@click.option("--wrapper-runs", type=click.IntRange(min=0), default=None,
              help="Green runs of `patchit dbt -- build` against `dbt build` on the example "
                   "project (--perf; default min(--runs, 3); 0 skips the wrapper's "
                   "measures).")  # fmt: skip
@click.option("--heal-runs", type=click.IntRange(min=0), default=None,
              help="Heals of the example project's column typo, each against `dbt build "
                   "--select` of the fix, and data checks against verifications (--perf; "
                   "default min(--runs, 3); 0 skips them).")  # fmt: skip
@click.option("--rss-candidates", type=click.IntRange(min=0), default=50, show_default=True,
              help="Candidates verified in a row on the warm dbt worker, its RSS read after "
                   "the first and the last (--perf; 0 skips it).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True,
              help='Print the measurements as JSON (with --perf --airflow: {"dbt": ..., '
                   '"airflow": ...}).')  # fmt: skip
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the generated repos here (default: a temp dir, removed); with both "
                   "parts, under dbt/ and airflow/. --perf reuses the project and failing "
                   "run an earlier --perf of the same size left there.")  # fmt: skip
def bench(
    corpus_dir: Path | None,
    only: tuple[str, ...],
    results_dir: Path | None,
    warehouse: str,
    memory_perf: bool,
    attempts: int,
    perf: bool,
    airflow: bool,
    n_models: int,
    calls: int,
    storm_events: int,
    runs: int,
    wrapper_runs: int | None,
    heal_runs: int | None,
    rss_candidates: int,
    as_json: bool,
    workdir: Path | None,
) -> None:
    """Benchmark patchit: the scenario corpus (no flag), `--perf` (dbt), `--airflow`,
    `--memory`.

    The corpus run exits 1 when a scenario misses its expectation, 0 otherwise.
    """
    if memory_perf:
        _memory(attempts, runs, as_json, workdir)
        return
    if not perf and not airflow:
        _corpus(corpus_dir, only, results_dir, as_json, workdir, warehouse)
        return
    both = perf and airflow
    reports: dict[str, str] = {}
    data: dict[str, object] = {}
    if perf:
        from patchit.bench import perf as dbt_perf

        dbt_dir = workdir / "dbt" if both and workdir else workdir
        result = dbt_perf.run_perf(
            n_models=n_models,
            runs=runs,
            workdir=dbt_dir,
            say=say,
            wrapper_runs=wrapper_runs,
            heal_runs=heal_runs,
            rss_candidates=rss_candidates,
        )
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


def _corpus(
    corpus_dir: Path | None,
    only: tuple[str, ...],
    results_dir: Path | None,
    as_json: bool,
    workdir: Path | None,
    warehouse: str,
) -> None:
    from patchit.bench import corpus
    from patchit.bench.corpus_report import markdown, outcomes_in, summary_lines, to_json

    names = [n.strip() for item in only for n in item.split(",") if n.strip()] or None
    source = corpus_dir or corpus.default_corpus()
    out = results_dir or source.parent / "results"
    chosen: Warehouse = next(w for w in WAREHOUSES if w == warehouse)
    run = corpus.run_corpus(
        source, names, workdir=workdir, results_dir=out, say=say, warehouse=chosen
    )
    if as_json:
        click.echo(json.dumps(to_json(run.results, run.summary), indent=2))
    elif chosen != "duckdb":  # beside what DuckDB did with the same scenarios
        click.echo(markdown(run.results, run.summary, outcomes_in(out / "latest.json")))
    else:
        click.echo(markdown(run.results, run.summary))
    for line in summary_lines(run.summary):
        say(line)
    say(f"results: {run.json_path} and {run.md_path}")
    sys.exit(0 if all(r.passed for r in run.results) else 1)


def _memory(attempts: int, runs: int, as_json: bool, workdir: Path | None) -> None:
    from patchit.bench import perf_memory

    measured = perf_memory.run_memory_perf(attempts=attempts, runs=runs, workdir=workdir, say=say)
    if as_json:
        click.echo(json.dumps(measured.to_json(), indent=2))
    else:
        click.echo(perf_memory.format_report(measured))

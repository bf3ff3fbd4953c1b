"""`patchit bench` (no flag): run the scenario corpus and judge each scenario from outside.

The corpus lives in `benchmarks/corpus/` of patchit's checkout (one TOML file per scenario),
the base projects in `benchmarks/projects/`; see `benchmarks/README.md`. Scenarios run one
after another (each spawns dbt or Airflow), each in its own fresh temp dir and
`PATCHIT_HOME`; Airflow's metadata DB is migrated once and copied per run.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from patchit.bench.corpus_judge import ScenarioResult, judge
from patchit.bench.corpus_model import (
    AIRFLOW_KINDS,
    Scenario,
    Warehouse,
    load_corpus,
    projects_dir,
)
from patchit.bench.corpus_report import CorpusSummary, summarise, write_results
from patchit.bench.corpus_run import run_scenario
from patchit.bench.corpus_runtimes import migrate_airflow_template
from patchit.bench.corpus_wh import SchemaBench
from patchit.errors import BadInputError

CHECKOUT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = CHECKOUT / "benchmarks" / "corpus"

Say = Callable[[str], None]


@dataclass
class CorpusRun:
    results: list[ScenarioResult]
    summary: CorpusSummary
    json_path: Path | None
    md_path: Path | None


def default_corpus() -> Path:
    if not DEFAULT_CORPUS.is_dir():
        raise BadInputError(
            "no scenario corpus beside this installation (it ships with patchit's source "
            "checkout, not the package); pass --corpus DIR, the benchmarks/corpus of a clone"
        )
    return DEFAULT_CORPUS


def run_corpus(
    corpus_dir: Path | None = None,
    only: list[str] | None = None,
    workdir: Path | None = None,
    results_dir: Path | None = None,
    say: Say = print,
    warehouse: Warehouse = "duckdb",
) -> CorpusRun:
    """Run the scenarios (all, or those named in `only`); write results when asked. With
    `warehouse="postgres"` (or `"snowflake"`), the dbt scenarios that make sense there run on
    a throw-away PostgreSQL cluster (a Snowflake emulator); results `latest-<warehouse>.*`."""
    corpus = corpus_dir or default_corpus()
    scenarios = load_corpus(corpus, only)
    projects = projects_dir(corpus)
    for scenario in scenarios:
        if not (projects / scenario.project).is_dir():
            raise BadInputError(f"{scenario.path}: no base project {projects / scenario.project}")
    if warehouse != "duckdb":
        scenarios = [s for s in scenarios if s.kind == "dbt" and warehouse in s.warehouses]
        if not scenarios:
            raise BadInputError(
                f"none of the chosen scenarios runs on {_TITLES[warehouse]} (dbt scenarios "
                f"whose `warehouses` list {warehouse}); pick others with --only"
            )
    base = workdir or Path(tempfile.mkdtemp(prefix="patchit-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        shared = None
        if warehouse != "duckdb":
            shared = _start(warehouse, stack, say)
            projects = _retargeted(shared, projects, scenarios, base / f"projects-{warehouse}")
        results = _run_all(scenarios, projects, base, workdir is None, say, shared)
    summary = summarise(results)
    json_path = md_path = None
    if results_dir is not None:
        where = "" if shared is None else f"-{warehouse}"
        stem = ("latest" if only is None else "subset") + where
        json_path, md_path = write_results(results, summary, results_dir, stem)
    return CorpusRun(results, summary, json_path, md_path)


_TITLES = {"duckdb": "DuckDB", "postgres": "Postgres", "snowflake": "Snowflake"}


def _start(warehouse: Warehouse, stack: ExitStack, say: Say) -> SchemaBench:
    """The throw-away server of a shared warehouse, stopped when `stack` closes."""
    if warehouse == "snowflake":
        from patchit.bench.corpus_sf import SfBench
        from patchit.bench.sf_server import FakesnowMissing, sf_server

        say("starting a throw-away Snowflake emulator (fakesnow) for the dbt scenarios")
        try:
            return SfBench(stack.enter_context(sf_server()))
        except FakesnowMissing as exc:
            raise BadInputError(str(exc)) from None
    from patchit.bench.corpus_pg import PgBench
    from patchit.bench.pg_server import pg_cluster

    say("starting a throw-away PostgreSQL cluster for the dbt scenarios")
    return PgBench(stack.enter_context(pg_cluster()))


def _retargeted(shared: SchemaBench, projects: Path, scenarios: list[Scenario], dest: Path) -> Path:
    for name in sorted({s.project for s in scenarios}):
        if not (dest / name).is_dir():
            shared.retarget(projects / name, dest / name)
    return dest


def _run_all(
    scenarios: list[Scenario],
    projects: Path,
    base: Path,
    throwaway: bool,
    say: Say,
    shared: SchemaBench | None,
) -> list[ScenarioResult]:
    try:
        template = _airflow_template(scenarios, base, say)
        results = []
        good_cache: dict[str, Path] = {}  # good checkouts, kept for the whole run
        for number, scenario in enumerate(scenarios, start=1):
            say(f"scenario {number}/{len(scenarios)}: {scenario.name} ({scenario.kind})")
            work = base / scenario.name
            if work.exists():
                shutil.rmtree(work)
            work.mkdir()
            result = judge(run_scenario(scenario, projects / scenario.project, work, template,
                                       good_cache, shared))  # fmt: skip
            say(f"    {result.outcome} {result.classification or '-'}: "
                f"{'pass' if result.passed else 'FAIL'} ({result.reason})")  # fmt: skip
            results.append(result)
            if throwaway:
                _clean(work, keep=set(good_cache.values()))
    finally:
        if throwaway:
            shutil.rmtree(base, ignore_errors=True)
    return results


def _airflow_template(scenarios: list[Scenario], base: Path, say: Say) -> Path | None:
    if not any(s.kind in AIRFLOW_KINDS for s in scenarios):
        return None
    template = base / "airflow-template"
    if (template / "airflow.db").exists():
        return template
    say("migrating one Airflow metadata DB for the Airflow scenarios")
    proc = migrate_airflow_template(template)
    if proc.code != 0:
        raise BadInputError(f"airflow db migrate failed; is Airflow installed? {proc.tail(600)}")
    return template


def _clean(work: Path, keep: set[Path]) -> None:
    """Remove a scenario's dir, except a good checkout later scenarios read from."""
    for child in work.iterdir():
        if child not in keep:
            shutil.rmtree(child, ignore_errors=True)

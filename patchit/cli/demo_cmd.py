"""`patchit demo`: heal a broken model in a throw-away copy of the example project.

It runs patchit exactly as a user would (`patchit dbt -- build` in a subprocess), on a temp git
repository, then shows the verified branch and the report, then a data failure escalated.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.rule import Rule

from patchit.cli.context import console, home_of
from patchit.cli.demo_airflow import run_airflow_demo
from patchit.errors import BadInputError
from patchit.examples import SHOP
from patchit.sandbox.git import run_git
from patchit.state.home import default_home

GIT_ID = {
    "GIT_AUTHOR_NAME": "Dana Engineer",
    "GIT_AUTHOR_EMAIL": "dana@example.com",
    "GIT_COMMITTER_NAME": "Dana Engineer",
    "GIT_COMMITTER_EMAIL": "dana@example.com",
}


def look_again(home: Path) -> str:
    """The command that lists the demo's incidents later, from any shell: the demo's state dir
    (`make demo`'s is `var/` in patchit's checkout) named unless patchit finds it untold."""
    if home.resolve() == default_home():
        return "patchit incidents"
    return f"patchit --home {shlex.quote(str(home.resolve()))} incidents"


def _git(repo: Path, *args: str) -> str:
    return run_git(repo, *args, env={**os.environ, **GIT_ID}).strip()


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--no-verify", "-m", message)


def _patchit(home: Path, repo: Path, log: Path, *args: str) -> tuple[int, list[str]]:
    """Run the real CLI; dbt's output to the log, patchit's own lines returned."""
    env = {**os.environ, "PATCHIT_HOME": str(home), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "patchit", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ patchit {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return proc.returncode, lines


def show_report(out: Console, markdown: str, title: str) -> None:
    """The report's head in a panel, wrapped to fit it: patchit's console never wraps its own
    lines (`soft_wrap`), and a panel crops a line it does not wrap, mid-word."""
    out.print(Panel(Markdown(markdown), title=title), soft_wrap=False)


def _step(title: str) -> None:
    console.print(Rule(f"[bold]{title}"))


def _show(lines: list[str]) -> None:
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


@click.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to create the demo repository (default: a new temp dir).",
)
@click.option(
    "--llm-replay",
    is_flag=True,
    help="Also heal a failure no fix-it knows through the model tier, answered by a local "
    "replay server speaking the Messages API (no network, no key needed).",
)
@click.pass_context
def demo(ctx: click.Context, workdir: Path | None, llm_replay: bool) -> None:
    """Break the example dbt project, heal it, escalate a data failure, heal a broken DAG."""
    if not (SHOP / "dbt_project.yml").is_file():
        raise BadInputError(
            f"{SHOP}: example project missing from this installation; reinstall patchit"
        )
    home = home_of(ctx)
    base = workdir or Path(tempfile.mkdtemp(prefix="patchit-demo-"))
    repo = base / "shop"
    if repo.exists():
        raise BadInputError(f"{repo}: already exists; pass an empty --workdir")
    log = base / "demo.log"
    shutil.copytree(SHOP, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb\n*.duckdb.wal\n.user.yml\n")
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "shop: staging and marts models")
    dbt = ["dbt", "--project-dir", str(repo), "--", "build", "--profiles-dir", str(repo)]

    _step("1. a green build of the example project (dbt, DuckDB)")
    with console.status("dbt build ..."):
        code, lines = _patchit(home, repo, log, *dbt)
    console.print(f"  dbt build exited {code}; the warehouse is {repo / 'shop.duckdb'}")
    if code != 0:
        raise click.ClickException(f"the example project does not build; see {log}")

    _step("2. a breaking commit: a column typo in a model two levels down")
    model = repo / "models" / "marts" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("sum(amount) as revenue", "sum(amout) as revenue"))
    _commit(repo, "daily_revenue: sum revenue per day")
    console.print("  models/marts/daily_revenue.sql: sum(amount) -> sum(amout)")
    with console.status("patchit dbt -- build (dbt fails, patchit heals) ..."):
        code, lines = _patchit(home, repo, log, *dbt)
    console.print(f"  dbt exited {code} (patchit keeps dbt's exit code); patchit said:")
    _show(lines)

    incidents = _incidents(home, repo, log)
    fixed = next((i for i in incidents if i["status"] == "fixed"), None)
    if fixed:
        _step(f"3. the verified fix on branch {fixed['branch']}")
        console.print(_git(repo, "log", "--oneline", "-n", "2", fixed["branch"]), markup=False)
        console.print(
            _git(repo, "show", "--format=", fixed["branch"]), markup=False, soft_wrap=True
        )
        console.print(f"  your branch is still: {_git(repo, 'branch', '--show-current')}")
        report = Path(str(fixed["report_md"])).read_text(encoding="utf-8")
        show_report(console, report.split("## Attempts")[0], str(fixed["report_md"]))

    to_merge = [str(fixed["branch"])] if fixed else []
    if llm_replay:
        # the model tier needs `anthropic` (patchit[llm]); the rest of the demo does not
        from patchit.cli.demo_llm import llm_lines, run_llm_demo

        for branch in to_merge:
            _git(repo, "merge", "-q", "--ff-only", branch)
            console.print(f"  (the engineer reviewed and merged {branch} into main)")
        to_merge = []
        run_llm_demo(repo, console, lambda *a: _patchit(home, repo, log, *a), _commit, dbt)
        by_llm = [i for i in _incidents(home, repo, log) if i["id"] != (fixed or {}).get("id")]
        for incident in by_llm:
            if incident["status"] == "fixed":
                to_merge.append(str(incident["branch"]))
                report = json.loads(Path(str(incident["report_json"])).read_text("utf-8"))
                console.print(
                    _git(repo, "show", "--format=", str(incident["branch"])),
                    markup=False,
                    soft_wrap=True,
                )
                console.print(f"  {llm_lines(report)}", markup=False)

    _step("4. a data failure: a new customer arrives without an email")
    for branch in to_merge:
        _git(repo, "merge", "-q", "--ff-only", branch)
        console.print(f"  (the engineer reviewed and merged {branch} into main)")
    seed = repo / "seeds" / "raw_customers.csv"
    seed.write_text(seed.read_text() + "7,Frances,Allen,,2024-03-20\n")
    _commit(repo, "seeds: load March customers")
    with console.status("patchit dbt -- build (a not_null test fails) ..."):
        code, lines = _patchit(home, repo, log, *dbt)
    console.print(f"  dbt exited {code}; patchit said:")
    _show(lines)

    airflow_incident: dict[str, Any] | None = None
    airflow_ran = importlib.util.find_spec("airflow") is not None
    if airflow_ran:
        airflow_incident = run_airflow_demo(base, home, log, console, _git, _commit)
    else:
        console.print(
            "(Airflow is not installed: `pip install 'patchit[airflow]'` for part 5)", markup=False
        )

    _step("incidents")
    final = _incidents(home, repo, log)
    if airflow_incident:
        final.append(airflow_incident)
    for incident in final:
        console.print(
            f"  {incident['id']}  {incident['status']:<9} {incident['classification'] or '-':<12}"
            f" attempts={incident['attempts']}  {incident['branch'] or ''}",
            markup=False,
        )
        console.print(f"      report: {incident['report_md']}", markup=False)
    console.print(f"\ndemo repository: {repo}\nfull log: {log}\nstate: {home}", markup=False)
    console.print(f"look at it again, from any directory: {look_again(home)}", markup=False)
    outcome = sorted((str(i["status"]), str(i["classification"])) for i in final)
    expected = [("escalated", "data_issue"), ("fixed", "code_bug")]
    if llm_replay:
        expected = [*expected, ("fixed", "code_bug")]
    if airflow_ran:
        expected = [*expected, ("fixed", "code_bug")]
    dag_ok = not airflow_ran or bool(
        airflow_incident and airflow_incident.get("dag_passes_on_branch")
    )
    if outcome != sorted(expected) or not dag_ok:
        raise click.ClickException(
            f"the demo did not end as it should (got {outcome}, fixed DAG passes: {dag_ok}); "
            f"see {log}"
        )


def _incidents(home: Path, repo: Path, log: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "PATCHIT_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "patchit", "incidents", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [i for i in json.loads(out) if i.get("repo_path") == str(repo.resolve())]

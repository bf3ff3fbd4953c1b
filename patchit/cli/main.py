"""`patchit` top-level group and the small commands (schema, heal, incidents, report).

Starting the CLI must stay cheap: `patchit --help` and the small commands run from cron and
scripts. The other commands live in their own modules and are imported only when invoked (or
when their own help is asked), and the small commands import what they use inside their bodies.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from patchit import __version__
from patchit.cli.incident_arg import incident_argument
from patchit.cli.lazy import LazyCommand, LazyGroup
from patchit.errors import BadInputError, PatchitError, one_line

if TYPE_CHECKING:
    from patchit.memory import Memory

INCIDENT_FIELDS = (
    "id",
    "fingerprint",
    "status",
    "classification",
    "branch",
    "report_md",
    "report_json",
    "attempts",
    "events",
    "summary",
    "repo_path",
    "created_utc",
    "updated_utc",
    "needs_human",
    "needs_review",
    "pr_url",
    "pr_state",
    "outcome",
)
# the commands in their own modules, imported when used; the short help is what
# `patchit --help` lists (tests/cli/test_docs.py keeps it equal to the command's own)
LAZY_COMMANDS = {
    "airflow": LazyCommand("patchit.cli.airflow_cmd:airflow", "Airflow intake: broken DAG files."),
    "apply": LazyCommand(
        "patchit.cli.apply_cmd:apply",
        "Apply a verified fix to your working tree; refuses if a file it touches changed since.",
    ),
    "approve": LazyCommand(
        "patchit.cli.review_cmd:approve",
        "Approve a verified fix; with [delivery] set and GITHUB_TOKEN, open its pull request.",
    ),
    "bench": LazyCommand(
        "patchit.cli.bench_cmd:bench",
        "Benchmark patchit: the scenario corpus (no flag), `--perf` (dbt), `--airflow`, "
        "`--memory`.",
    ),
    "ci": LazyCommand(
        "patchit.cli.ci_cmd:ci",
        "In a pull request's CI job: run dbt, heal failures, deliver fixes in the pull request.",
    ),
    "dbt": LazyCommand(
        "patchit.cli.dbt_cmd:dbt",
        "Run dbt with DBT_ARGS exactly as `dbt` would; heal each failed node.",
    ),
    "doctor": LazyCommand(
        "patchit.cli.doctor_cmd:doctor",
        "Check the installation: versions, sandbox, memory and spool, dbt and Airflow.",
    ),
    "demo": LazyCommand(
        "patchit.cli.demo_cmd:demo",
        "Break the example dbt project, heal it, escalate a data failure, heal a broken DAG.",
    ),
    "inspect": LazyCommand(
        "patchit.cli.inspect_cmd:inspect",
        "Check out a fix's branch in a worktree outside your checkout and re-run it there.",
    ),
    "pr": LazyCommand(
        "patchit.cli.pr_cmd:pr",
        "Push a verified fix's branch and open (or update) its pull request.",
    ),
    "reject": LazyCommand(
        "patchit.cli.review_cmd:reject",
        "Reject a verified fix: its diff and strategy are not offered again for this failure.",
    ),
    "state": LazyCommand(
        "patchit.cli.state_cmd:state",
        "The shared state: import an existing SQLite state into Postgres.",
    ),
    "track": LazyCommand(
        "patchit.cli.track_cmd:track",
        "Judge merged fixes from the runs seen since: fixed, no_effect or regression (reopened).",
    ),
    "sandbox": LazyCommand(
        "patchit.cli.sandbox_cmd:sandbox",
        "Drop the Postgres and Snowflake sandbox schemas that killed heals left behind.",
    ),
    "spool": LazyCommand(
        "patchit.cli.spool_cmd:spool",
        "List, retry or drop the events waiting in the spool.",
    ),
    "worker": LazyCommand(
        "patchit.cli.worker_cmd:worker",
        "Take spooled events, group them into incidents and heal them.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy_commands=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    help="State dir (default: $PATCHIT_HOME, else $XDG_STATE_HOME/patchit).",
)
@click.version_option(__version__, prog_name="patchit")
@click.pass_context
def cli(ctx: click.Context, home: Path | None) -> None:
    """patchit: heal failed dbt models and Airflow tasks, with verified patches."""
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    if home is not None:
        from patchit.config import resolve_home

        # one state dir for everything this command starts: the sandboxes' writable areas,
        # the dbt wrapper's child and the worktrees all resolve it from the environment
        os.environ["PATCHIT_HOME"] = str(resolve_home(home))


@cli.command()
def schema() -> None:
    """Print the JSON schema of UniversalFailureEvent."""
    from patchit.events.model import event_json_schema

    click.echo(json.dumps(event_json_schema(), indent=2))


@cli.command("heal")
@click.argument("target")
@click.pass_context
def heal_cmd(ctx: click.Context, target: str) -> None:
    """Heal one event file (or retry incident ID). Exit 0 fixed, 1 not fixed, 2 bad input.

    TARGET is an event JSON file, or the id of an incident to try again (its latest event, on
    today's HEAD when the repository moved on: reproduced there first; attempts already made
    for the fingerprint still count against the limit). A fixed incident
    stays fixed: its branch is named and the exit is 0. An open incident whose run was stopped
    is resumed; a fix that run verified lands without a new verification.
    """
    from patchit.cli.context import make_context, print_outcome, say
    from patchit.events.model import load_event
    from patchit.intake.checkouts import local_checkout
    from patchit.intake.validate import check_healable
    from patchit.loop.loop import heal
    from patchit.loop.recovery import sweep_dead_runs
    from patchit.loop.recurrence import at_head
    from patchit.memory.lifecycle import Trigger
    from patchit.memory.short_ids import looks_like_incident_id, resolve_incident_id
    from patchit.text.inputs import input_exists

    path = Path(target)
    if not input_exists(path) and looks_like_incident_id(target):
        memory = _open_memory(ctx)
        target = resolve_incident_id(memory, target)
        incident = memory.get_incident(target)
        if incident.status == "fixed":
            say(f"incident {incident.id} is already fixed: nothing to heal")
            print_outcome(incident.id, "fixed", incident.branch, incident.report_md, [])
            sys.exit(0)
        latest = memory.latest_event(incident.id)
        if latest is None:
            raise BadInputError(
                f"incident {target}: no event is recorded; heal an event file instead"
            )
        latest = local_checkout(latest, _home(ctx))  # this host's clone of its repository
        repo = check_healable(latest, f"incident {target}")
        event = at_head(latest, repo)
        if event is not latest:
            say(f"incident {target}: the repository moved on from {str(latest.commit)[:12]}; "
                f"healing the failure as it stands at {str(event.commit)[:12]}")  # fmt: skip
        memory.transition(incident.id, Trigger.RETRY)
    else:
        event = local_checkout(load_event(path), _home(ctx))
        repo = check_healable(event, str(path))
    loop_ctx = make_context(_home(ctx), repo)
    try:
        if line := sweep_dead_runs(loop_ctx.home, loop_ctx.memory, loop_ctx.owner).summary():
            say(line)
        outcome = heal(event, loop_ctx)
    finally:
        loop_ctx.close()
    print_outcome(
        outcome.incident.id,
        outcome.incident.status,
        outcome.incident.branch,
        outcome.incident.report_md,
        outcome.commands,
    )
    sys.exit(0 if outcome.incident.status == "fixed" else 1)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of objects).")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["open", "fixed", "escalated", "failed"]),
    help="Only incidents in this state (repeat for several).",
)
@click.option("--repo", type=click.Path(file_okay=False), help="Only this repository's incidents.")
@click.option("--since", help="Only incidents active since: 7d, 24h, 30m, or a date / ISO time.")
@click.pass_context
def incidents(
    ctx: click.Context,
    as_json: bool,
    statuses: tuple[str, ...],
    repo: str | None,
    since: str | None,
) -> None:
    """List incidents, newest first."""
    from patchit.cli.incidents_view import keep, parse_since, table
    from patchit.intake.worktree_snapshot import snapshot_of
    from patchit.memory.ledger import Ledger
    from patchit.memory.records import revert_label_of

    after = parse_since(since) if since else None

    memory = _open_memory(ctx)
    for line in _damage_notes(_home(ctx), said=memory.notices):
        click.echo(f"patchit: {line}", err=True)
    ledger = Ledger(memory)
    rows = []
    for incident in memory.list_incidents():
        row = incident.model_dump(mode="json", include=set(INCIDENT_FIELDS))
        if not keep(row, statuses, repo, after):
            continue
        usage = ledger.incident_totals(incident.id)
        row.update(tokens=usage.tokens, cost_usd=round(usage.cost_usd, 6))
        # "reverts your change: <intent>" when the passing candidate undid the change
        row["review_label"] = (
            revert_label_of(memory.attempts_for(incident.id)) if incident.needs_review else None
        )
        # the snapshot, its base and files when it failed on uncommitted work, else None
        latest = memory.latest_event(incident.id)
        work = snapshot_of(latest) if latest is not None else None
        row["uncommitted"] = work.as_context() if work else None
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no incidents")
        return
    live = {r["id"] for r in rows if r["status"] == "open" and memory.lease_is_live(r["id"])}
    for line in table(rows, live):
        click.echo(line)


@cli.command()
@incident_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "json", "html"]),
    default="md",
    show_default=True,
    help="Which report: print the Markdown (md) or JSON (json), or the path of the "
    "self-contained HTML page (html).",
)
@click.pass_context
def report(ctx: click.Context, incident_id: str, fmt: str) -> None:
    """Print the Root Cause Report of one incident (with --format html, its file's path)."""
    incident = _open_memory(ctx).get_incident(incident_id)
    missing = BadInputError(
        f"incident {incident_id}: no report yet (status {incident.status}); "
        f"heal it with `patchit heal {incident_id}`"
    )
    if fmt == "html":
        click.echo(_html_report(incident_id, incident.report_md, incident.report_json, missing))
        return
    path = incident.report_md if fmt == "md" else incident.report_json
    if not path or not Path(path).is_file():
        raise missing
    text = Path(path).read_text(encoding="utf-8")
    if fmt == "md" and sys.stdout.isatty():
        _show_markdown(text)  # a person reads it; a pipe or a script gets the file as it is
        return
    click.echo(text, nl=False)


def _show_markdown(text: str) -> None:
    from rich.console import Console
    from rich.markdown import Markdown

    Console(highlight=False).print(Markdown(text, hyperlinks=False))


def _html_report(
    incident_id: str, report_md: str | None, report_json: str | None, missing: BadInputError
) -> Path:
    """The incident's HTML report; one written before patchit wrote HTML is rendered now from
    its JSON, beside it."""
    from patchit.reports.render import html_path, write_html_from_json

    known = report_md or report_json
    if not known:
        raise missing
    path = html_path(known)
    if path.is_file():
        return path
    if not report_json or not Path(report_json).is_file():
        raise missing
    try:
        return write_html_from_json(Path(report_json))
    except (OSError, ValueError) as exc:
        raise BadInputError(
            f"incident {incident_id}: its report {report_json} cannot be rendered as HTML "
            f"({exc.__class__.__name__}); heal it again with `patchit heal {incident_id}`"
        ) from exc


def _home(ctx: click.Context) -> Path:
    # patchit.cli.context.home_of, without importing the loop that module brings along
    from patchit.config import resolve_home

    return resolve_home(ctx.obj.get("home") if ctx.obj else None)


def _open_memory(ctx: click.Context) -> Memory:
    from patchit.memory import Memory

    memory = Memory.open(_home(ctx))
    for notice in memory.notices:
        click.echo(f"patchit: {notice}", err=True)
    return memory


def _damage_notes(home: Path, said: list[str]) -> list[str]:
    """One line per damaged memory or spool file moved aside and still kept (but those the
    lines already `said` name)."""
    from patchit.intake.spool import spool_path
    from patchit.memory import DB_RELATIVE_PATH
    from patchit.state.dbfiles import quarantined

    notes = []
    for what, path in (("attempt memory", home / DB_RELATIVE_PATH), ("spool", spool_path(home))):
        for moved in quarantined(path):
            if any(str(moved) in line for line in said):
                continue
            lost = "incidents" if what == "attempt memory" else "spooled events"
            notes.append(
                f"the {what} was found damaged and moved aside to {moved}: the {lost} it "
                "held are not listed here (restore or inspect it; delete it to hide this note)"
            )
    return notes


def _terminate(signum: int, _frame: object) -> None:
    # cron and schedulers stop jobs with SIGTERM: unwind so worktrees and leases are released
    raise SystemExit(128 + signum)


# Set by `main()`, the console script and `python -m patchit`: the process is patchit's own,
# so a command may end it without the interpreter's teardown (`dbt_cmd._exit`).
OWNS_PROCESS = False


def main() -> None:
    global OWNS_PROCESS
    OWNS_PROCESS = True
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("patchit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except BadInputError as exc:
        click.echo(f"patchit: error: {one_line(exc)}", err=True)
        sys.exit(2)
    except PatchitError as exc:
        click.echo(f"patchit: error: {one_line(exc)}", err=True)
        sys.exit(1)
    except SystemExit:
        raise

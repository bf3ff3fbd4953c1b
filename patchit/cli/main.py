"""`patchit` top-level group and the small commands (schema, heal, incidents, report)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import click

from patchit import __version__
from patchit.cli.context import home_of, make_context, open_memory, print_outcome
from patchit.config import resolve_home
from patchit.errors import BadInputError, PatchitError
from patchit.events.model import event_json_schema, load_event
from patchit.intake.validate import check_healable
from patchit.loop import heal
from patchit.memory.ledger import Ledger

_INCIDENT_ID = re.compile(r"\d{8}-[0-9a-f]{6}")
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
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
        # one state dir for everything this command starts: the sandboxes' writable areas,
        # the dbt wrapper's child and the worktrees all resolve it from the environment
        os.environ["PATCHIT_HOME"] = str(resolve_home(home))


@cli.command()
def schema() -> None:
    """Print the JSON schema of UniversalFailureEvent."""
    click.echo(json.dumps(event_json_schema(), indent=2))


@cli.command("heal")
@click.argument("target")
@click.pass_context
def heal_cmd(ctx: click.Context, target: str) -> None:
    """Heal one event file (or retry incident ID). Exit 0 fixed, 1 not fixed, 2 bad input.

    TARGET is an event JSON file, or the id of an incident to try again (its latest event;
    attempts already made for the fingerprint still count against the limit).
    """
    path = Path(target)
    if not path.exists() and _INCIDENT_ID.fullmatch(target):
        memory = open_memory(home_of(ctx))
        incident = memory.get_incident(target)
        event = memory.events_for(incident.id)[-1]
        repo = check_healable(event, f"incident {target}")
        memory.update_incident(incident.id, status="open")
    else:
        event = load_event(path)
        repo = check_healable(event, str(path))
    loop_ctx = make_context(home_of(ctx), repo)
    try:
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
@click.pass_context
def incidents(ctx: click.Context, as_json: bool) -> None:
    """List incidents, newest first."""
    memory = open_memory(home_of(ctx))
    ledger = Ledger(memory)
    rows = []
    for incident in memory.list_incidents():
        row = incident.model_dump(mode="json", include=set(INCIDENT_FIELDS))
        usage = ledger.incident_totals(incident.id)
        row.update(tokens=usage.tokens, cost_usd=round(usage.cost_usd, 6))
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no incidents")
        return
    click.echo(
        f"{'id':<16} {'status':<10} {'class':<17} {'tries':>5} {'tokens':>7} {'cost':>8}  "
        f"{'branch':<25} summary"
    )
    for r in rows:
        cost = f"${r['cost_usd']:.4f}"
        click.echo(
            f"{r['id']:<16} {r['status']:<10} {r['classification'] or '-':<17} "
            f"{r['attempts']:>5} {r['tokens']:>7} {cost:>8}  "
            f"{r['branch'] or '-':<25} {(r['summary'] or '')[:80]}"
        )


@cli.command()
@click.argument("incident_id")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.pass_context
def report(ctx: click.Context, incident_id: str, fmt: str) -> None:
    """Print the Root Cause Report of one incident."""
    incident = open_memory(home_of(ctx)).get_incident(incident_id)
    path = incident.report_md if fmt == "md" else incident.report_json
    if not path or not Path(path).is_file():
        raise BadInputError(
            f"incident {incident_id}: no report yet (status {incident.status}); "
            f"heal it with `patchit heal {incident_id}`"
        )
    click.echo(Path(path).read_text(encoding="utf-8"), nl=False)


def _register() -> None:
    from patchit.cli.airflow_cmd import airflow
    from patchit.cli.bench_cmd import bench
    from patchit.cli.dbt_cmd import dbt
    from patchit.cli.demo_cmd import demo
    from patchit.cli.worker_cmd import worker

    cli.add_command(dbt)
    cli.add_command(demo)
    cli.add_command(airflow)
    cli.add_command(worker)
    cli.add_command(bench)


_register()


def _terminate(signum: int, _frame: object) -> None:
    # cron and schedulers stop jobs with SIGTERM: unwind so worktrees and leases are released
    raise SystemExit(128 + signum)


def main() -> None:
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
        click.echo(f"patchit: error: {exc}", err=True)
        sys.exit(2)
    except PatchitError as exc:
        click.echo(f"patchit: error: {exc}", err=True)
        sys.exit(1)
    except SystemExit:
        raise

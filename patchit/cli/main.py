"""`patchit` top-level group and the small commands (schema, heal, incidents, report)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from patchit import __version__
from patchit.cli.context import console, home_of, make_context, open_memory, print_outcome
from patchit.errors import BadInputError, PatchitError
from patchit.events.model import event_json_schema, load_event
from patchit.loop import heal
from patchit.sandbox.git import repo_root

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


@cli.command()
def schema() -> None:
    """Print the JSON schema of UniversalFailureEvent."""
    click.echo(json.dumps(event_json_schema(), indent=2))


@cli.command("heal")
@click.argument("event_file", type=click.Path(path_type=Path))
@click.pass_context
def heal_cmd(ctx: click.Context, event_file: Path) -> None:
    """Heal one event file. Exit 0 fixed, 1 not fixed, 2 bad input."""
    event = load_event(event_file)
    if not event.repo_path or repo_root(Path(event.repo_path)) is None:
        raise BadInputError(
            f"{event_file}: repo_path {event.repo_path!r} is not a git repository; "
            "set repo_path to the git root holding the failing code"
        )
    if event.commit is None:
        raise BadInputError(f"{event_file}: event has no commit; set `commit` to the failing sha")
    for name, artifact in event.artifacts.items():
        check_json_artifact(name, Path(artifact), event_file)
    repo = Path(event.repo_path)
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


def check_json_artifact(name: str, path: Path, event_file: Path) -> None:
    """A dbt artifact the event points at must be readable JSON, or the event is bad input."""
    if path.suffix != ".json" or not path.exists():
        return
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInputError(
            f"{path}: {name} artifact of {event_file} is unreadable or truncated JSON ({exc}); "
            "re-run dbt to regenerate it or drop it from the event's artifacts"
        ) from exc


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of objects).")
@click.pass_context
def incidents(ctx: click.Context, as_json: bool) -> None:
    """List incidents, newest first."""
    memory = open_memory(home_of(ctx))
    rows = [
        i.model_dump(mode="json", include=set(INCIDENT_FIELDS)) for i in memory.list_incidents()
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no incidents")
        return
    table = Table("id", "status", "class", "attempts", "branch", "summary")
    for r in rows:
        table.add_row(
            r["id"],
            r["status"],
            r["classification"] or "-",
            str(r["attempts"]),
            r["branch"] or "-",
            (r["summary"] or "")[:60],
        )
    console.print(table)


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
            "heal it first with `patchit heal` or `patchit dbt`"
        )
    click.echo(Path(path).read_text(encoding="utf-8"), nl=False)


def _register() -> None:
    from patchit.cli.dbt_cmd import dbt
    from patchit.cli.demo_cmd import demo

    cli.add_command(dbt)
    cli.add_command(demo)


_register()


def main() -> None:
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

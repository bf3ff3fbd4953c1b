"""`patchit airflow scan`: spool one event per DAG file that fails to import."""

from __future__ import annotations

import os
from pathlib import Path

import click

from patchit.cli.context import home_of, say
from patchit.errors import BadInputError
from patchit.intake.airflow_scan import (
    collect_import_errors,
    fetch_import_errors,
    import_error_events,
)
from patchit.intake.spool import fallback_path, spool_events


@click.group("airflow")
def airflow() -> None:
    """Airflow intake: broken DAG files."""


@airflow.command("scan")
@click.option(
    "--dags-folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="DAG folder to parse (default: $AIRFLOW__CORE__DAGS_FOLDER). With --api, the folder "
    "the API's relative file names are under.",
)
@click.option("--api", "api_url", help="Base URL of a running Airflow; read its import errors.")
@click.option(
    "--bundle", "bundle_name", help="DAG bundle name to record with the events (with --api)."
)
@click.pass_context
def scan(
    ctx: click.Context, dags_folder: Path | None, api_url: str | None, bundle_name: str | None
) -> None:
    """Parse the DAG folder as the DAG processor does; spool each DAG file that fails to import.

    With --api URL, the import errors come from that Airflow's REST API instead (token from
    AIRFLOW_API_TOKEN). `patchit worker` picks the events up.
    """
    home = home_of(ctx)
    folder = dags_folder or _env_dags_folder()
    if api_url:
        errors = fetch_import_errors(api_url, os.environ.get("AIRFLOW_API_TOKEN"))
        base = folder or Path.cwd()
    else:
        if folder is None:
            raise BadInputError(
                "patchit airflow scan: no DAG folder; pass --dags-folder DIR "
                "or set AIRFLOW__CORE__DAGS_FOLDER"
            )
        errors = collect_import_errors(folder, home)
        base = folder
    events = import_error_events(errors, base, bundle_name)
    if events and not spool_events([e.model_dump(mode="json") for e in events], home):
        say(f"the spool is locked or damaged: events written to {fallback_path(home)}, "
            "which the worker imports")  # fmt: skip
    for event in events:
        say(f"broken DAG file {event.unit_id}: {event.error_type}: {event.error_message[:120]}")
    click.echo(f"spooled {len(events)} import error(s)")


def _env_dags_folder() -> Path | None:
    value = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER")
    return Path(value) if value else None


def _register() -> None:
    from patchit.cli.airflow_check import check

    airflow.add_command(check)


_register()

"""`patchit track`: one pass of outcome tracking over the landed fixes."""

from __future__ import annotations

import click

from patchit.cli.context import home_of, open_memory


@click.command("track")
@click.option(
    "--airflow-api",
    metavar="URL",
    help="Airflow API server to read task runs from (else [airflow] api_url, "
    "else PATCHIT_AIRFLOW_API_URL); the token comes from AIRFLOW_API_TOKEN.",
)
@click.pass_context
def track(ctx: click.Context, airflow_api: str | None) -> None:
    """Judge merged fixes from the runs seen since: fixed, no_effect or regression (reopened)."""
    from patchit.delivery.track import track as track_pass

    home = home_of(ctx)
    memory = open_memory(home)
    outcomes = track_pass(memory, say=click.echo, airflow_api=airflow_api, home=home)
    if not outcomes:
        click.echo("patchit: no landed fix to track")

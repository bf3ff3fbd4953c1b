"""`patchit track`: one pass of outcome tracking over the landed fixes."""

from __future__ import annotations

import click

from patchit.cli.context import home_of, open_memory


@click.command("track")
@click.pass_context
def track(ctx: click.Context) -> None:
    """Judge merged fixes from the runs seen since: fixed, no_effect or regression (reopened)."""
    from patchit.delivery.track import track as track_pass

    outcomes = track_pass(open_memory(home_of(ctx)), say=click.echo)
    if not outcomes:
        click.echo("patchit: no landed fix to track")

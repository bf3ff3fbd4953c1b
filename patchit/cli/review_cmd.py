"""`patchit approve ID` and `patchit reject ID --why ...`: a human's decision on a fix."""

from __future__ import annotations

import os

import click

from patchit.cli.context import home_of, open_memory
from patchit.cli.incident_arg import incident_argument


@click.command("approve")
@incident_argument
@click.option("--why", default="", help="A note kept with the approval.")
@click.pass_context
def approve(ctx: click.Context, incident_id: str, why: str) -> None:
    """Approve a verified fix; with [delivery] set and GITHUB_TOKEN, open its pull request."""
    from patchit.delivery.approval import approve as record_approval
    from patchit.delivery.deliver import TOKEN_ENV, deliver

    memory = open_memory(home_of(ctx))
    incident = record_approval(incident_id, memory, why)
    click.echo(f"patchit: incident {incident_id} approved")
    if not os.environ.get(TOKEN_ENV):
        click.echo(f"patchit: next: `patchit pr {incident_id}` delivers {incident.branch}")
        return
    pull = deliver(incident_id, memory)
    click.echo(f"patchit: pull request #{pull.number} {pull.state} {pull.url}")


@click.command("reject")
@incident_argument
@click.option("--why", required=True, help="What is wrong with the fix (kept in memory).")
@click.pass_context
def reject(ctx: click.Context, incident_id: str, why: str) -> None:
    """Reject a verified fix: its diff and strategy are not offered again for this failure."""
    from patchit.delivery.approval import reject as record_rejection

    incident = record_rejection(incident_id, open_memory(home_of(ctx)), why)
    click.echo(
        f"patchit: incident {incident_id} rejected ({incident.status.value}); "
        f"`patchit heal {incident_id}` tries the other strategies"
    )

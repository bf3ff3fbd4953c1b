"""`patchit pr ID`: deliver a verified fix as a pull request."""

from __future__ import annotations

import click

from patchit.cli.context import home_of, open_memory


@click.command("pr")
@click.argument("incident_id")
@click.pass_context
def pr(ctx: click.Context, incident_id: str) -> None:
    """Push a verified fix's branch and open (or update) its pull request.

    Needs [delivery] provider and repo in the repository's .patchit.toml and GITHUB_TOKEN.
    Exit 0 delivered, 1 the push or the code host failed, 2 not deliverable.
    """
    from patchit.delivery.deliver import deliver

    pull = deliver(incident_id, open_memory(home_of(ctx)))
    verb = "opened" if pull.created else "updated"
    if pull.state == "merged":
        verb = "already merged:"
    click.echo(f"patchit: pull request #{pull.number} {verb} {pull.url}")

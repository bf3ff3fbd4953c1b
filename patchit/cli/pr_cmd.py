"""`patchit pr ID`: deliver a verified fix as a pull request."""

from __future__ import annotations

import click

from patchit.cli.context import home_of, open_memory
from patchit.cli.incident_arg import incident_argument


@click.command("pr")
@incident_argument
@click.pass_context
def pr(ctx: click.Context, incident_id: str) -> None:
    """Push a verified fix's branch and open (or update) its pull request.

    Needs [delivery] provider and repo in $PATCHIT_HOME/patchit.toml (the operator's settings:
    a repository's .patchit.toml may not say where the token goes) and GITHUB_TOKEN.
    Exit 0 delivered, 1 the push or the code host failed, 2 not deliverable.
    """
    from patchit.delivery.deliver import deliver

    home = home_of(ctx)
    pull = deliver(incident_id, open_memory(home), home=home, say=_warn)
    verb = "opened" if pull.created else "updated"
    if pull.state == "merged":
        verb = "already merged:"
    click.echo(f"patchit: pull request #{pull.number} {verb} {pull.url}")


def _warn(line: str) -> None:
    click.echo(f"patchit: {line}", err=True)

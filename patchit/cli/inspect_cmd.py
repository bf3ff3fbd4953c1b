"""`patchit inspect ID`: the fix in a worktree of its own, re-run against a fresh warehouse copy."""

from __future__ import annotations

import sys

import click

from patchit.cli.context import home_of
from patchit.cli.incident_arg import incident_argument


@click.command("inspect")
@incident_argument
@click.option("--clean", is_flag=True, help="Remove the inspection worktree and its scratch.")
@click.option("--no-run", is_flag=True, help="Only create the worktree; do not re-run the unit.")
@click.pass_context
def inspect(ctx: click.Context, incident_id: str, clean: bool, no_run: bool) -> None:
    """Check out a fix's branch in a worktree outside your checkout and re-run it there.

    The worktree is $PATCHIT_HOME/inspect/ID. The failed unit is re-run in it against a fresh
    sandbox copy of the warehouse, and its outputs are compared with the last good commit's
    (rows, columns, a sample of differences). Your checkout and database are not touched.
    Exit 0 the fix passes as meant, 1 it does not, 2 nothing to inspect.
    """
    from pathlib import Path

    from patchit.cli.context import make_context, open_memory, say
    from patchit.loop.inspection import close_inspection, describe, open_inspection

    home = home_of(ctx)
    with open_memory(home) as memory:
        recorded = memory.get_incident(incident_id).repo_path
    repo = Path(recorded) if recorded and Path(recorded).is_dir() else None
    loop_ctx = make_context(home, repo)  # the repository's .patchit.toml sets the sandbox
    try:
        if clean:
            removed = close_inspection(incident_id, loop_ctx)
            say(f"inspection of {incident_id} {'removed' if removed else 'was not there'}")
            return
        inspection = open_inspection(incident_id, loop_ctx, rerun=not no_run)
    finally:
        loop_ctx.close()
    for line in describe(inspection):
        click.echo(line)
    sys.exit(0 if inspection.ok else 1)

"""`patchit apply ID`: put a verified fix into the working tree (see
`patchit.delivery.apply_fix`)."""

from __future__ import annotations

import click

from patchit.cli.context import home_of, open_memory
from patchit.cli.incident_arg import incident_argument


@click.command("apply")
@incident_argument
@click.option(
    "--print", "print_only", is_flag=True, help="Print the fix as a patch; write nothing."
)
@click.pass_context
def apply(ctx: click.Context, incident_id: str, print_only: bool) -> None:
    """Apply a verified fix to your working tree; refuses if a file it touches changed since.

    The fix of a failure on uncommitted work (`patchit dbt -- build` before a commit) is made
    on a snapshot of your tree; this applies it there, leaving the index as it is. Every file
    the fix touches must still be as it was when the fix was made: otherwise nothing is
    written. Exit 0 applied, 2 nothing to apply or a file changed since.
    """
    from patchit.delivery.apply_fix import apply_fix, fix_of

    memory = open_memory(home_of(ctx))
    try:
        fix = fix_of(memory.get_incident(incident_id), memory)
    finally:
        memory.close()
    if print_only:
        click.echo(fix.patch(), nl=False)
        return
    files = apply_fix(fix)
    click.echo(f"patchit: applied the fix of incident {incident_id} to {fix.repo}: "
               f"{', '.join(files)} (not staged)")  # fmt: skip

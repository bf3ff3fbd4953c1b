"""`patchit state import`: move an existing SQLite state into the shared Postgres state."""

from __future__ import annotations

from pathlib import Path

import click

from patchit.cli.context import home_of


@click.group("state")
def state() -> None:
    """The shared state: import an existing SQLite state into Postgres."""


@state.command("import")
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(path_type=Path),
    help="The old $PATCHIT_HOME (memory and spool), or its memory/attempts.sqlite3.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be imported; write nothing.")
@click.pass_context
def import_(ctx: click.Context, source: Path, dry_run: bool) -> None:
    """Copy a SQLite state (incidents, events, attempts, the LLM ledger, reviews, pull
    requests, outcomes, last good commits, and the spool's waiting events) into this
    deployment's Postgres state ([state] url or PATCHIT_STATE_URL).

    One transaction: all or nothing. The SQLite files are only read. Running it again imports
    nothing twice; a Postgres state holding other data under the same keys is refused with one
    line (exit 2). Stop the old worker first: its leases are not copied. Events waiting in
    the old home's fallback file (spool/fallback.jsonl) are not in its spool yet: the import
    is refused until the old worker has run once (`patchit worker --once`) to spool them.
    """
    from patchit.errors import BadInputError
    from patchit.state.url import STATE_URL_ENV, deployment_file, mask_url, state_url
    from patchit.worker.state_import import import_state

    home = home_of(ctx)
    url = state_url(home)
    if url is None:
        raise BadInputError(
            f"no Postgres state to import into: set {STATE_URL_ENV} or [state] url in "
            f"{deployment_file(home)}"
        )
    done = import_state(source, url, dry_run=dry_run)
    prefix = "dry run, nothing written: would have " if dry_run else ""
    click.echo(f"{mask_url(url)}: {prefix}{done.summary()}")

"""`patchit sandbox clean`: drop the Postgres and Snowflake sandbox schemas that killed heals
left behind."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from patchit.sandbox.pg_orphans import Verdict


@click.group("sandbox")
def sandbox() -> None:
    """Drop the Postgres and Snowflake sandbox schemas that killed heals left behind."""


@sandbox.command("clean")
@click.option(
    "--project-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The dbt project whose target holds the schemas (default: the cwd).",
)
@click.option(
    "--profiles-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where profiles.yml is (default: as dbt finds it).",
)
@click.option("--target", default=None, help="The profile's target (default: its `target:`).")
@click.option(
    "--max-age-hours",
    type=click.FloatRange(min=1.0),
    default=24.0,
    show_default=True,
    help="Drop sandbox schemas of another host or pid namespace older than this.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be dropped; drop nothing.")
def clean(
    project_dir: Path | None,
    profiles_dir: Path | None,
    target: str | None,
    max_age_hours: float,
    dry_run: bool,
) -> None:
    """Drop the `patchit_<hex>` schemas of heals that died (e.g. `kill -9`) in a Postgres
    target's database, their `patchit_db_<hex>` databases (copies of it) on its server, and
    the `patchit_r_<hex>` roles their candidates ran as.

    Only schemas owned by the profile's role (or a role it is a member of) are judged. A
    schema is dropped only when its comment is patchit's and names its owner, and that run is
    dead here (same host, boot and pid namespace), or ran elsewhere (another host, container
    or boot; or an older patchit that did not name them) more than --max-age-hours ago.
    Schemas without patchit's comment, live runs', and ones that the user's objects depend on
    (a view, a foreign key: a cascade would drop them) are kept, with why. One line per
    schema; exit 0, 1 when the database cannot be reached or a schema of a dead run could
    not be dropped (two lines on stderr: which, and what to do), 2 for a target that is not
    Postgres or Snowflake. On Snowflake, the `PATCHIT_<incident>_<n>` schemas of the profile's
    database, by the same rules (its label: the schema's comment, or its owner table's).
    """
    from patchit.errors import BadInputError
    from patchit.harnesses.dbt.sf import sweep as sf_sweep
    from patchit.sandbox.dbt_profile import project_target
    from patchit.sandbox.pg_orphans import sweep, sweep_clones, sweep_roles
    from patchit.sandbox.postgres import PgWarehouse, is_postgres
    from patchit.sandbox.snowflake import SfWarehouse, is_snowflake

    cwd = Path.cwd()
    project = (project_dir or cwd).resolve()
    if not (project / "dbt_project.yml").is_file():
        raise BadInputError(f"{project}: no dbt_project.yml; pass --project-dir")
    resolved = project_target(project, "sandbox-clean", profiles_dir, target)
    if is_snowflake(resolved.output):  # its schemas only: no databases or roles of its own
        snowflake = SfWarehouse(resolved.output)
        try:
            done = sf_sweep(snowflake, max_age_s=max_age_hours * 3600, dry_run=dry_run)
        finally:
            snowflake.close()
        _report(done, [], [], snowflake.where, dry_run)
    if not is_postgres(resolved.output):
        raise BadInputError(
            f"{resolved.profiles_file}: target {resolved.target!r} of profile "
            f"{resolved.profile!r} is {resolved.output.get('type')!r}, not postgres or "
            "snowflake: it has no "
            "sandbox schemas; pass --target"
        )
    warehouse = PgWarehouse(resolved.output)
    try:
        done = sweep(warehouse, max_age_s=max_age_hours * 3600, dry_run=dry_run)
        # after the schemas: a dead run's role owns what it built in them
        roles = sweep_roles(warehouse, max_age_s=max_age_hours * 3600, dry_run=dry_run)
    finally:
        warehouse.close()
    databases = sweep_clones(resolved.output, max_age_s=max_age_hours * 3600, dry_run=dry_run)
    _report(done, databases, roles, warehouse.where, dry_run)


def _report(
    done: list[tuple[Verdict, bool]],
    databases: list[tuple[Verdict, bool]],
    roles: list[tuple[Verdict, bool]],
    where: str,
    dry_run: bool,
) -> NoReturn:
    """One line per schema (database, role) judged, the count, and exit 0 (1: a failed drop)."""
    schemas, done = len(done), [*done, *databases, *roles]
    for verdict, dropped in done:
        if dry_run and verdict.drop:
            click.echo(f"would drop {verdict.schema}: {verdict.why}")
        else:
            click.echo(verdict.line(dropped))
    count = sum(dropped for _, dropped in done)
    verb = "would drop" if dry_run else "dropped"
    count = sum(v.drop for v, _ in done) if dry_run else count
    owned = f" and {len(databases)} database(s) of its own" if databases else ""
    owned += f" and {len(roles)} role(s) of its own" if roles else ""
    click.echo(f"{where}: {schemas} sandbox schema(s){owned}, {verb} {count}")
    failed = [verdict for verdict, _ in done if verdict.error]
    for verdict in failed:
        click.echo(f"patchit: error: {verdict.failure_line()}", err=True)
        click.echo(f"patchit: {verdict.remedy_line()}", err=True)
    sys.exit(1 if failed else 0)

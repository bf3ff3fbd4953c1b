"""`patchit doctor`: check this installation, one line per check, and say what to fix."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from patchit.cli.context import home_of

if TYPE_CHECKING:
    from patchit.config import PatchitConfig
    from patchit.doctor.doctor import Check


@click.command("doctor")
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository whose .patchit.toml [sandbox] and [airflow] settings to check "
    "(default: the cwd).",
)
@click.option("--deep", is_flag=True, help="Also run `dbt --version` and `airflow version`.")
@click.pass_context
def doctor(ctx: click.Context, repo: Path | None, deep: bool) -> None:
    """Check the installation: versions, sandbox, memory and spool, dbt and Airflow.

    The repository's dbt target is checked too: where a fix would be verified (Postgres:
    reachable, sandbox schemas allowed, and whether an incident gets a copy of the database).

    The last check says where the Airflow callback hands failures over (`[airflow] heal`):
    for "dag", whether the Airflow API server has the heal DAG, unpaused.

    Each line is ok, warn or fail, with what to fix. Exit 1 if any check fails, else 0.
    Nothing is changed: the SQLite files are opened read-only.
    """
    from patchit.doctor.airflow import check_heal
    from patchit.doctor.doctor import exit_code, run_checks
    from patchit.doctor.home import check_state_dir
    from patchit.doctor.warehouse import check_warehouse

    root = (repo or Path.cwd()).resolve()
    config, said = _settings(home_of(ctx), root)
    checks = [
        *said,
        *run_checks(home_of(ctx), config.sandbox, deep=deep),
        *check_state_dir(home_of(ctx), config.sandbox),
        *check_warehouse(root, config.sandbox),
        *check_heal(root),
    ]
    for check in checks:
        click.echo(check.line())
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    click.echo(f"{len(checks)} checks: {failed} failed, {warned} warnings")
    sys.exit(exit_code(checks))


def _settings(home: Path, root: Path) -> tuple[PatchitConfig, list[Check]]:
    """The operator's settings narrowed by the working tree's `.patchit.toml` (what the next
    commit would set), and a warning for each setting the repository may not set."""
    from patchit.config import PatchitConfig
    from patchit.doctor.doctor import Check
    from patchit.errors import BadInputError
    from patchit.policy.settings import settings_in_worktree

    try:
        settings = settings_in_worktree(home, root)
    except BadInputError as exc:
        return PatchitConfig(), [Check("fail", "settings", str(exc))]
    return settings.config, [Check("warn", "settings", line) for line in settings.refused]

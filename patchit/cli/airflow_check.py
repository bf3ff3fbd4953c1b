"""`patchit airflow check [--changed-only]`: a DAG repository's CI step. Import the DAG files
as the DAG processor would and heal each import error at once (`patchit airflow scan` spools
them for a worker instead).

In a pull request, a DAG file the change did not touch that fails to import is not the
change's doing: `--changed-only` keeps the files changed since the base (the pull request's
merge base in a GitHub Actions job, else HEAD's parent). The exit code says whether every DAG
file kept imports: a verified fix on a branch is help, not a pass.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from patchit.cli.context import home_of, make_context, print_healed, say_text
from patchit.errors import BadInputError
from patchit.sandbox.git import repo_and_head, run_git


@click.command("check")
@click.option(
    "--dags-folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="DAG folder to import (default: $AIRFLOW__CORE__DAGS_FOLDER, else ./dags).",
)
@click.option(
    "--changed-only", is_flag=True, help="Only DAG files changed since --base (CI on a change)."
)
@click.option(
    "--base",
    help="The commit changes count from (default: a GitHub Actions pull request's merge base, "
    "else HEAD's parent).",
)
@click.pass_context
def check(
    ctx: click.Context, dags_folder: Path | None, changed_only: bool, base: str | None
) -> None:
    """Import DAG files as the DAG processor would; heal each import error.

    Exit 0 when every DAG file checked imports, 1 when one does not (healed on a branch or
    not), 2 for bad input.
    """
    from patchit.intake.airflow_scan import collect_import_errors, import_error_events
    from patchit.loop import heal

    home = home_of(ctx)
    folder = (dags_folder or _default_folder()).resolve()
    if not folder.is_dir():
        raise BadInputError(f"{folder}: no DAG folder there; pass --dags-folder DIR")
    repo, head = repo_and_head(folder)
    if repo is None or head is None:
        raise BadInputError(f"{folder} is not in a git repository with a commit; commit it first")
    changed = _changed_files(repo, base) if changed_only else None
    errors = collect_import_errors(folder, home)
    events = [
        e for e in import_error_events(errors, folder)
        if changed is None or e.unit_id in changed
    ]  # fmt: skip
    skipped = len(errors) - len(events)
    if skipped:
        say_text(f"{skipped} DAG file(s) that fail to import were not changed: not checked")
    if not events:
        click.echo("every DAG file checked imports")
        return
    loop_ctx = make_context(home, repo)
    try:
        for event in events:
            say_text(f"{event.unit_id}: {event.error_type}: {event.error_message[:160]}")
            print_healed(heal(event, loop_ctx))
    finally:
        loop_ctx.close()
    click.echo(f"{len(events)} DAG file(s) fail to import")
    sys.exit(1)


def _default_folder() -> Path:
    env = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER", "").strip()
    return Path(env) if env else Path("dags")


def _changed_files(repo: Path, base: str | None) -> set[str]:
    """Files (relative to the repository) changed between the base and HEAD."""
    rev = base or _pull_request_base(repo) or "HEAD^"
    if rev.startswith("-"):
        raise BadInputError(f"--base {rev!r}: not a commit")
    found = run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if not found.strip():
        raise BadInputError(
            f"--base {rev}: no such commit in {repo}; fetch it (actions/checkout `fetch-depth: 0`)"
        )
    names = run_git(repo, "diff", "--name-only", "--no-renames", found.strip(), "HEAD")
    return set(names.split("\n")) - {""}


def _pull_request_base(repo: Path) -> str | None:
    """The merge base of the GitHub Actions pull request this job runs for, if it is one."""
    if not os.environ.get("GITHUB_EVENT_PATH"):
        return None
    from patchit.cli.ci_cmd import find_merge_base
    from patchit.delivery.ci_env import read_pull_request_job

    job = read_pull_request_job()
    return find_merge_base(repo, job.base_sha, job.base_ref, job.head_sha)

"""`patchit airflow check [--changed-only]`: a DAG repository's CI step. Import the DAG files
as the DAG processor would and heal each import error at once (`patchit airflow scan` spools
them for a worker instead).

In a pull request, a DAG file the change did not touch that fails to import is not the
change's doing: `--changed-only` keeps the files changed since the base (the pull request's
merge base in a GitHub Actions job, else HEAD's parent). The exit code says whether every DAG
file kept imports: a verified fix on a branch is help, not a pass.

In a GitHub Actions job of a pull request the check delivers where the author looks, as
`patchit ci` does for dbt: the job's environment is read first (a partial one is one line, exit
2, before anything is imported), the merge base is recorded as each DAG file's last good commit
(what the pull request changed is the breaking change, not whatever HEAD's parent holds), and
`patchit.delivery.ci_deliver` posts the suggestion or the pull request into the head branch,
the one summary comment and the status. A job of another event (a push, a schedule: GitHub
sets GITHUB_EVENT_PATH for those too) is not a pull request's and checks as outside CI.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from patchit.cli.context import home_of, make_context, print_healed, say_text
from patchit.errors import BadInputError, PatchitError
from patchit.sandbox.git import repo_and_head, run_git

if TYPE_CHECKING:
    from patchit.delivery.ci_env import PullRequestJob
    from patchit.events.model import UniversalFailureEvent

COMMAND = "patchit airflow check"


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
@click.option(
    "--artifact-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="In a pull request's job: where the summary and reports are written for upload "
    "(default: $RUNNER_TEMP/patchit, else $PATCHIT_HOME/ci).",
)
@click.pass_context
def check(
    ctx: click.Context,
    dags_folder: Path | None,
    changed_only: bool,
    base: str | None,
    artifact_dir: Path | None,
) -> None:
    """Import DAG files as the DAG processor would; heal each import error.

    In a GitHub Actions job of a pull request, heals against its merge base and delivers in
    the pull request as `patchit ci` does (suggestions or a pull request into the head branch,
    one summary comment, the status `patchit`). Exit 0 when every DAG file checked imports, 1
    when one does not (healed on a branch or not), 2 for bad input.
    """
    from patchit.intake.airflow_scan import collect_import_errors, import_error_events
    from patchit.loop.loop import heal

    home = home_of(ctx)
    folder = (dags_folder or _default_folder()).resolve()
    if not folder.is_dir():
        raise BadInputError(f"{folder}: no DAG folder there; pass --dags-folder DIR")
    repo, head = repo_and_head(folder)
    if repo is None or head is None:
        raise BadInputError(f"{folder} is not in a git repository with a commit; commit it first")
    job = _pull_request_job()
    merge_base = None
    if job is not None:
        from patchit.cli.ci_cmd import find_merge_base

        merge_base = find_merge_base(repo, job.base_sha, job.base_ref, job.head_sha)
    changed = _changed_files(repo, base or merge_base) if changed_only else None
    errors = collect_import_errors(folder, home)
    events = [
        e for e in import_error_events(errors, folder)
        if changed is None or e.unit_id in changed
    ]  # fmt: skip
    skipped = len(errors) - len(events)
    if skipped:
        say_text(f"{skipped} DAG file(s) that fail to import were not changed: not checked")
    if job is not None and merge_base is not None:
        from patchit.cli.ci_cmd import default_artifacts

        artifacts = artifact_dir or default_artifacts(home)
        _heal_in_pull_request(job, home, repo, merge_base, events, artifacts)
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


def _heal_in_pull_request(
    job: PullRequestJob,
    home: Path,
    repo: Path,
    merge_base: str,
    events: list[UniversalFailureEvent],
    artifacts: Path,
) -> NoReturn:
    """Heal each import error against the merge base, then deliver in the pull request; exit
    as outside CI (1 while a file fails, else 0). Said, never raised: what was healed
    still reaches the pull request, and the exit code stays the check's."""
    from patchit.delivery.ci_deliver import deliver_in_pull_request
    from patchit.delivery.ci_summary import DAG_CHECK
    from patchit.loop.loop import heal, project_key

    healed: list[str] = []
    loop_ctx = make_context(home, repo)
    try:
        # the loop reads an import error's last good commit under its project key
        for key in dict.fromkeys(project_key(e) for e in events):
            loop_ctx.memory.record_last_good(key, merge_base)
        for event in events:
            say_text(f"{event.unit_id}: {event.error_type}: {event.error_message[:160]}")
            try:
                outcome = heal(event, loop_ctx)
            except PatchitError as exc:
                say_text(f"{event.unit_id}: could not heal: {exc}")
                continue
            print_healed(outcome)
            healed.append(outcome.incident.id)
        incidents = [loop_ctx.memory.get_incident(i) for i in dict.fromkeys(healed)]
    finally:
        loop_ctx.close()
    try:
        deliver_in_pull_request(job, repo, merge_base, incidents, 1 if events else 0, home,
                                artifacts, say_text, runtime=DAG_CHECK)  # fmt: skip
    except PatchitError as exc:
        say_text(f"could not deliver in the pull request: {exc}")
    if events:
        click.echo(f"{len(events)} DAG file(s) fail to import")
        sys.exit(1)
    click.echo("every DAG file checked imports")
    sys.exit(0)


def _pull_request_job() -> PullRequestJob | None:
    """The GitHub Actions pull request this job runs for; None outside Actions or for another
    event. A pull request's job with a partial environment is BadInputError (one line)."""
    if not os.environ.get("GITHUB_EVENT_PATH", "").strip():
        return None
    event = os.environ.get("GITHUB_EVENT_NAME", "").strip()
    if event and not event.startswith("pull_request"):
        return None
    from patchit.delivery.ci_env import read_pull_request_job

    return read_pull_request_job(command=COMMAND)


def _changed_files(repo: Path, base: str | None) -> set[str]:
    """Files (relative to the repository) changed between the base and HEAD."""
    rev = base or "HEAD^"
    if rev.startswith("-"):
        raise BadInputError(f"--base {rev!r}: not a commit")
    found = run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if not found.strip():
        raise BadInputError(
            f"--base {rev}: no such commit in {repo}; fetch it (actions/checkout `fetch-depth: 0`)"
        )
    names = run_git(repo, "diff", "--name-only", "--no-renames", found.strip(), "HEAD")
    return set(names.split("\n")) - {""}

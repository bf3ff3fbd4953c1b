"""`patchit ci -- <dbt args>`: the dbt wrapper in a pull request's CI job, delivering there.

The job's environment says which pull request it is (`patchit.delivery.ci_env`); it is read,
and the pull request's merge base found, before dbt starts, so a workflow that is not a
pull request's, or a shallow clone, is one line and exit 2 rather than a build that heals
nothing. Then dbt runs as asked (Slim CI's `--select state:modified+ --defer --state` pass
through), each failure is healed as `patchit dbt` heals it, with the merge base as the
project's last good commit (what the pull request changed is the breaking change), and
`patchit.delivery.ci_deliver` puts the outcome in the pull request. The job's exit code is
dbt's: a suggested fix does not make a failing build pass.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from patchit.cli.dbt_cmd import StrictCommand
from patchit.errors import BadInputError, PatchitError
from patchit.intake.dbt_run import (
    build_dbt_args,
    check_dbt_installed,
    now_utc,
    project_name,
    resolve_project_dir,
    run_dbt,
)
from patchit.sandbox.git import dirty_tracked_files, repo_and_head, run_git
from patchit.state.home import resolve_home

if TYPE_CHECKING:
    from patchit.delivery.ci_env import PullRequestJob
    from patchit.loop.loop import HealOutcome


@click.command("ci", cls=StrictCommand, context_settings={"allow_interspersed_args": False})
@click.option("--project-dir", help="dbt project dir (default: dbt's own rule, the cwd).")
@click.option("--profiles-dir", help="Passed to dbt as --profiles-dir.")
@click.option("--target", help="Passed to dbt as --target.")
@click.option(
    "--artifact-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the summary and reports are written for upload "
    "(default: $RUNNER_TEMP/patchit, else $PATCHIT_HOME/ci).",
)
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def ci(
    ctx: click.Context,
    project_dir: str | None,
    profiles_dir: str | None,
    target: str | None,
    artifact_dir: Path | None,
    dbt_args: tuple[str, ...],
) -> None:
    """In a pull request's CI job: run dbt, heal failures, deliver fixes in the pull request.

    Reads the GitHub Actions environment (GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_SHA,
    GITHUB_HEAD_REF, GITHUB_BASE_REF; GITHUB_TOKEN to write, GITHUB_API_URL,
    GITHUB_STEP_SUMMARY). Small fixes arrive as review suggestions, larger ones as a pull
    request into the head branch; one summary comment is kept up to date and the commit status
    `patchit` set. A fork's job, or one without a token, sends nothing: the summary goes to the
    step summary and --artifact-dir. Exits with dbt's exit code (2: a missing or partial CI
    environment, before dbt starts).
    """
    from patchit.delivery.ci_env import read_pull_request_job

    if not dbt_args:
        raise BadInputError("patchit ci: no dbt command given; use `patchit ci -- build ...`")
    job = read_pull_request_job()
    check_dbt_installed()
    project = resolve_project_dir(list(dbt_args), project_dir)
    project_name(project)
    repo, commit = repo_and_head(project)
    if repo is None or commit is None:
        raise BadInputError(
            f"{project} is not in a git checkout with a commit; check the repository out "
            "(actions/checkout) before `patchit ci`"
        )
    merge_base = find_merge_base(repo, job.base_sha, job.base_ref, job.head_sha)
    home = resolve_home(ctx.obj.get("home") if ctx.obj else None)
    artifacts = artifact_dir or default_artifacts(home)
    args = build_dbt_args(list(dbt_args), project, profiles_dir, target)
    dirty = dirty_tracked_files(repo, project, True)
    started = now_utc()
    exit_code, record = run_dbt(args, home / "runs", invocation=list(dbt_args))
    try:
        _heal_and_deliver(job, home, artifacts, merge_base, exit_code, record, args, project,
                          repo, commit, started, dirty)  # fmt: skip
    except PatchitError as exc:
        _say(f"could not heal or deliver: {exc}")
    except Exception:  # never turn dbt's exit code into a patchit crash
        import traceback

        from patchit.cli.context import console

        console.print(traceback.format_exc(), markup=False)
        _say("internal error while healing (traceback above); dbt's exit code is kept")
    sys.exit(exit_code)


def find_merge_base(repo: Path, base_sha: str, base_ref: str, head_sha: str) -> str:
    """The pull request's merge base in this clone; BadInputError when the clone lacks it."""
    for base in (base_sha, f"refs/remotes/origin/{base_ref}"):
        found = run_git(repo, "merge-base", base, head_sha, check=False).strip()
        if found:
            return found
    raise BadInputError(
        f"the merge base of {base_ref} ({base_sha[:12]}) and the head {head_sha[:12]} is not in "
        f"the clone at {repo}; check out with `fetch-depth: 0` (actions/checkout)"
    )


def _heal_and_deliver(
    job: PullRequestJob,
    home: Path,
    artifacts: Path,
    merge_base: str,
    exit_code: int,
    record: dict[str, Any],
    args: list[str],
    project: Path,
    repo: Path,
    commit: str,
    started: datetime,
    dirty: list[str],
) -> None:
    from patchit.cli.context import print_healed
    from patchit.delivery.ci_deliver import deliver_in_pull_request
    from patchit.memory import Memory
    from patchit.memory.outcomes import project_key_for
    from patchit.worker.dbt_wrapper import DbtRun, heal_dbt_run, settle_spooled, spool_failures

    run = DbtRun(exit_code, record, args, project, repo, commit, started, dirty)
    run = spool_failures(run, home)  # first of all: killed from here, nothing is lost
    healed: list[str] = []

    def on_outcome(outcome: HealOutcome) -> None:
        healed.append(outcome.incident.id)
        print_healed(outcome)

    done = False
    try:
        with Memory.open(home) as memory:
            # what the pull request changed is the breaking change: the merge base is good
            memory.record_last_good(project_key_for(repo, project), merge_base)
            try:
                heal_dbt_run(run, home, memory, _say, on_outcome=on_outcome)
                done = True
            except PatchitError as exc:  # the pull request still hears what was healed
                _say(f"could not heal every failure: {exc}")
            incidents = [memory.get_incident(i) for i in dict.fromkeys(healed)]
        deliver_in_pull_request(job, repo, merge_base, incidents, exit_code, home, artifacts,
                                _say)  # fmt: skip
    finally:
        if run.spooled:
            settle_spooled(home, run, done)


def default_artifacts(home: Path) -> Path:
    runner_temp = os.environ.get("RUNNER_TEMP", "").strip()
    return Path(runner_temp) / "patchit" if runner_temp else home / "ci"


def _say(message: str) -> None:
    from patchit.cli.context import say_text

    say_text(message)

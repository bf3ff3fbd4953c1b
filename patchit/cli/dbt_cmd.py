"""`patchit dbt -- <dbt args>`: run dbt as the user asked, then `patchit.dbt_wrapper` heals
what failed."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from patchit.cli.context import console, home_of, open_memory, print_healed, say, step
from patchit.errors import BadInputError, PatchitError, VcsError
from patchit.intake.dbt import (
    build_dbt_args,
    check_dbt_installed,
    now_utc,
    project_name,
    resolve_project_dir,
    run_dbt,
)
from patchit.sandbox.git import dirty_tracked_files, head_commit, repo_root


class StrictCommand(click.Command):
    """patchit's own options are parsed strictly before `--`; a typo is not passed to dbt."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            raise click.UsageError(
                f"{exc.format_message()} patchit's own options go before `--`, dbt's after it",
                ctx,
            ) from exc


@click.command("dbt", cls=StrictCommand, context_settings={"allow_interspersed_args": False})
@click.option("--project-dir", help="dbt project dir (default: dbt's own rule, the cwd).")
@click.option("--profiles-dir", help="Passed to dbt as --profiles-dir.")
@click.option("--target", help="Passed to dbt as --target.")
@click.option("--no-heal", is_flag=True, help="Only run dbt and record failures.")
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def dbt(
    ctx: click.Context,
    project_dir: str | None,
    profiles_dir: str | None,
    target: str | None,
    no_heal: bool,
    dbt_args: tuple[str, ...],
) -> None:
    """Run dbt with DBT_ARGS exactly as `dbt` would; heal each failed node.

    Exits with dbt's exit code once dbt has started (2 for patchit's own errors before).
    Outside git, or where healing is impossible, dbt runs unchanged and patchit says why.
    """
    if not dbt_args:
        raise BadInputError("patchit dbt: no dbt command given; use `patchit dbt -- build ...`")
    check_dbt_installed()
    project = resolve_project_dir(list(dbt_args), project_dir)
    project_name(project)
    repo = repo_root(project)
    commit = _head_or_none(repo) if repo else None
    cannot_heal = _cannot_heal(project, repo, commit)
    if cannot_heal and not no_heal:
        # a drop-in for `dbt`: run it unchanged, and say once why nothing will be healed
        say(f"not healing: {cannot_heal}; running dbt unchanged")
    home = home_of(ctx)
    memory = open_memory(home)
    dirty = dirty_tracked_files(repo, under=project) if repo and commit else []
    from patchit.dbt_wrapper import DbtRun, heal_dbt_run  # the loop loads once dbt has run

    args = build_dbt_args(list(dbt_args), project, profiles_dir, target)
    started = now_utc()
    exit_code, record = run_dbt(args, home / "runs", invocation=list(dbt_args))
    run = DbtRun(
        exit_code, record, args, project, repo, commit, started, dirty, no_heal or bool(cannot_heal)
    )
    try:
        heal_dbt_run(run, home, memory, say, on_outcome=print_healed, step=step)
    except PatchitError as exc:
        say(f"could not heal: {exc}")
    except Exception:  # never turn dbt's exit code into a patchit crash
        console.print(traceback.format_exc(), markup=False)
        say("internal error while healing (traceback above); dbt's exit code is kept")
    sys.exit(exit_code)


def _cannot_heal(project: Path, repo: Path | None, commit: str | None) -> str | None:
    """Why healing is impossible here (dbt still runs), or None."""
    if repo is None:
        return f"{project} is not inside a git repository (commit it to git to be healed)"
    if commit is None:
        return f"the git repository {repo} has no commit yet (commit the project to be healed)"
    return None


def _head_or_none(repo: Path) -> str | None:
    try:
        return head_commit(repo)
    except VcsError:
        return None

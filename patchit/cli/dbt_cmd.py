"""`patchit dbt -- <dbt args>`: run dbt as the user asked, then heal what failed."""

from __future__ import annotations

import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from patchit.cli.context import console, home_of, make_context, open_memory, print_outcome, say
from patchit.errors import BadInputError, PatchitError, VcsError
from patchit.events.model import UniversalFailureEvent
from patchit.intake.dbt import (
    build_dbt_args,
    check_dbt_installed,
    events_from_run,
    now_utc,
    project_name,
    resolve_project_dir,
    run_dbt,
)
from patchit.loop import group_by_cause, heal_group, project_key_for
from patchit.memory import Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from patchit.sandbox.git import dirty_tracked_files, head_commit, repo_root


@click.command(
    "dbt", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
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
    """
    if not dbt_args:
        raise BadInputError("patchit dbt: no dbt command given; use `patchit dbt -- build ...`")
    check_dbt_installed()
    project = resolve_project_dir(list(dbt_args), project_dir)
    project_name(project)
    repo = repo_root(project)
    if repo is None and not no_heal:
        raise BadInputError(
            f"{project}: not inside a git repository, so patchit cannot heal it; "
            "commit the project to git, or pass --no-heal to only run dbt"
        )
    home = home_of(ctx)
    memory = open_memory(home)
    dirty = dirty_tracked_files(repo, under=project) if repo else []
    commit = _head_or_none(repo) if repo else None
    if repo and commit is None and not no_heal:
        raise BadInputError(
            f"{repo}: the repository has no commit yet, so patchit cannot heal it; "
            "commit the project, or pass --no-heal to only run dbt"
        )
    args = build_dbt_args(list(dbt_args), project, profiles_dir, target)
    started = now_utc()
    exit_code, record = run_dbt(args, home / "runs")
    try:
        _after_dbt(
            exit_code, record, args, project, repo, commit, dirty, no_heal, started, memory, home
        )
    except PatchitError as exc:
        say(f"could not heal: {exc}")
    except Exception:  # never turn dbt's exit code into a patchit crash
        console.print(traceback.format_exc(), markup=False)
        say("internal error while healing (traceback above); dbt's exit code is kept")
    sys.exit(exit_code)


def _after_dbt(
    exit_code: int,
    record: dict[str, Any],
    args: list[str],
    project: Path,
    repo: Path | None,
    commit: str | None,
    dirty: list[str],
    no_heal: bool,
    started: datetime,
    memory: Memory,
    home: Path,
) -> None:
    if exit_code == 0:
        if repo and commit and not dirty and is_full_build(args):
            memory.record_last_good(project_key_for(repo, project), commit)
        return
    if record.get("usage_error"):
        return  # dbt printed its usage error; nothing ran, nothing to heal
    if not record:
        say(f"dbt exited {exit_code} without a result patchit could read; nothing to heal")
        return
    events = events_from_run(record, args, project, repo, commit, started)
    if not events:
        say(f"dbt exited {exit_code} but no node of this run failed; nothing to heal")
        return
    say(f"{len(events)} failed node(s): " + ", ".join(e.unit_id for e in events[:5]))
    if no_heal or dirty or repo is None:
        why = (
            "--no-heal was given"
            if no_heal
            else f"uncommitted changes to tracked files ({', '.join(dirty[:3])}); "
            "only committed code is healed, commit or stash them and re-run"
        )
        _record_only(events, memory)
        say(f"recorded, not healing: {why}")
        return
    loop_ctx = make_context(home, repo)
    try:
        for group in group_by_cause(events):
            outcome = heal_group(group, loop_ctx)
            incident = outcome.incident
            print_outcome(
                incident.id, incident.status, incident.branch, incident.report_md, outcome.commands
            )
    finally:
        loop_ctx.close()


def is_full_build(args: list[str]) -> bool:
    """A green `dbt build` of the whole project: only that vouches for every model."""
    command = next((a for a in args if not a.startswith("-")), "")
    selecting = {"--select", "-s", "--models", "-m", "--exclude", "--selector", "--resource-type"}
    return command == "build" and not any(a.split("=")[0] in selecting for a in args)


def _head_or_none(repo: Path) -> str | None:
    try:
        return head_commit(repo)
    except VcsError:
        return None


def _record_only(events: list[UniversalFailureEvent], memory: Memory) -> None:
    for event in events:
        memory.open_or_attach(event, error_fingerprint(event), cause_key(event))

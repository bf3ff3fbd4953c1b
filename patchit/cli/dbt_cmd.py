"""`patchit dbt -- <dbt args>`: run dbt as the user asked, then `patchit.worker.dbt_wrapper` heals
what failed.

A green run must cost what `dbt` costs: before dbt starts this module asks git two questions
(the repository and its HEAD; the project's uncommitted work) and loads nothing of the healing
machinery; while dbt runs, a helper thread imports the memory's run log (plain sqlite3); after
a green run, writing the nodes' results is all that is left. The loop, the harnesses and the
console are imported only once dbt has failed (or there is something to say).

Uncommitted work is healed too, in the edit-build loop: when the project differs from HEAD,
the work becomes a snapshot commit before dbt starts (what dbt reads; the user's tree, index
and stash list untouched, see `patchit.intake.worktree_snapshot`), and the failures are healed
as failures of that commit, on top of HEAD.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Generic, NoReturn, TypeVar

import click

from patchit.errors import BadInputError, PatchitError
from patchit.intake.dbt_run import (
    build_dbt_args,
    check_dbt_installed,
    now_utc,
    project_name,
    resolve_project_dir,
    run_dbt,
)
from patchit.intake.dbt_spool import spool_ticket
from patchit.intake.worktree_snapshot import UncommittedWork, WorkSnapshot, find_uncommitted
from patchit.loop.faults import checkpoint
from patchit.sandbox.git import repo_and_head
from patchit.state.home import resolve_home
from patchit.state.liveness import claim_owner

if TYPE_CHECKING:
    from patchit.loop.loop import HealOutcome
    from patchit.memory.runlog import RunLog
    from patchit.worker.dbt_wrapper import DbtRun

T = TypeVar("T")


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
    repo, commit = repo_and_head(project)
    cannot_heal = _cannot_heal(project, repo, commit)
    if cannot_heal and not no_heal:
        # a drop-in for `dbt`: run it unchanged, and say once why nothing will be healed
        _say(f"not healing: {cannot_heal}; running dbt unchanged")
    home = resolve_home(ctx.obj.get("home") if ctx.obj else None)
    args = build_dbt_args(list(dbt_args), project, profiles_dir, target)
    committed = repo if repo and commit else None
    store = _Meanwhile(_store_class)
    # before dbt, not beside it: dbt's own writes (a committed target/ or logs/) must not make
    # the user's tree look changed, and the snapshot must be what dbt reads
    work = find_uncommitted(committed, project) if committed else UncommittedWork()
    snapshot = None
    if work and commit and committed and not (no_heal or cannot_heal):
        snapshot = _snapshot(committed, commit, work)
    dirty = list(work.files)
    failing = snapshot.commit if snapshot else commit
    uncommitted = snapshot.as_context() if snapshot else None
    started = now_utc()
    heals = not (no_heal or cannot_heal or (dirty and snapshot is None))
    ticket = None
    if committed and failing and heals:
        ticket = spool_ticket(home, claim_owner(), project, committed, failing, started,
                              uncommitted)  # fmt: skip
    exit_code, record = run_dbt(
        args, home / "runs", invocation=list(dbt_args), meanwhile=store.start,
        on_error=partial(_prewarm_dbt, home, committed) if committed and ticket else None,
        spool_ticket=ticket,
    )  # fmt: skip
    run = None
    healed = False
    try:
        from patchit.worker.dbt_wrapper import DbtRun, heal_dbt_run, spool_failures

        run = DbtRun(
            exit_code, record, args, project, repo, failing, started, dirty,
            no_heal or bool(cannot_heal), uncommitted=uncommitted,
        )  # fmt: skip
        run = spool_failures(run, home)  # first of all: killed from here, nothing is lost
        checkpoint("spooled")
        memory = store.result()(home)  # opens the file here: a connection stays in its thread
        heal_dbt_run(run, home, memory, _say, on_outcome=_print_healed, step=_step)
        healed = True
    except PatchitError as exc:
        _say(f"could not heal: {exc}")
    except Exception:  # never turn dbt's exit code into a patchit crash
        import traceback

        from patchit.cli.context import console

        console.print(traceback.format_exc(), markup=False)
        _say("internal error while healing (traceback above); dbt's exit code is kept")
    if run is not None and run.spooled:
        _settle(home, run, healed)
    _exit(exit_code)


def _settle(home: Path, run: DbtRun, healed: bool) -> None:
    from patchit.worker.dbt_wrapper import settle_spooled

    try:
        settle_spooled(home, run, healed)
    except Exception as exc:  # the rows stay taken by this run: a worker takes them after it
        _say(f"could not mark the spooled failures done ({exc}); a worker will see them")
        return
    if not healed:
        _say(f"{len(run.spooled)} failure(s) left in the spool for `patchit worker`")


def _prewarm_dbt(home: Path, repo: Path) -> None:
    """A node errored and dbt goes on: start the dbt worker the heal will verify with (it
    imports dbt for seconds) now, in this thread, which heals later (see
    `patchit.harnesses.dbt.prewarm`). Its sandbox settings are those of HEAD's parent, never
    the breaking commit's (the heal adopts the worker only when its own, at the last good
    commit, are the same)."""
    # what spooling the failures needs first thing after dbt's exit, loaded now: the window
    # in which a killed wrapper loses them is as short as can be
    import patchit.intake.dbt
    import patchit.intake.spool
    import patchit.state.liveness  # noqa: F401
    from patchit.harnesses.dbt.prewarm import prewarm
    from patchit.policy.settings import narrow, operator_config, rules_commit

    prewarm(narrow(operator_config(home), repo, rules_commit(repo, None, None)).config.sandbox)


def _exit(code: int) -> NoReturn:
    """`sys.exit(code)`; but once healing has loaded its machinery (dbt, DuckDB: hundreds of
    modules), the interpreter's teardown of them (half a second) is skipped: everything is
    closed and committed by now, the atexit handlers run and the streams are flushed, then the
    process ends. Only when patchit's entry point owns the process (`patchit`, `python -m
    patchit`), never in a host that called the command itself, nor under click's test runner."""
    own = sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__
    entry = sys.modules.get("patchit.cli.main")  # the process is patchit's own, not a host's
    if own and getattr(entry, "OWNS_PROCESS", False) and "patchit.loop.loop" in sys.modules:
        import atexit
        import os

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


class _Meanwhile(Generic[T]):
    """`fn()` in a daemon thread while dbt runs (`start()`); `result()` waits for it and
    re-raises."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="patchit-dbt-meanwhile", daemon=True)
        self._started = False

    def start(self) -> None:
        self._thread.start()
        self._started = True

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to result()'s caller
            self._error = exc

    def result(self) -> T:
        if self._started:
            self._thread.join()
        else:  # it could not start beside dbt: do the work now
            self._run()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def _store_class() -> type[RunLog]:
    """What recording a run needs, loaded while dbt runs: the wrapper's policy and the
    memory's run log (standard library sqlite3)."""
    import patchit.memory.migrations  # (the log checks the schema is current)
    import patchit.worker.dbt_wrapper  # noqa: F401
    from patchit.memory.runlog import RunLog

    return RunLog


# the console (rich) is imported only when patchit has something to say


def _say(message: str) -> None:
    from patchit.cli.context import say_text

    say_text(message)  # text, not markup: a `[section] key` must show


def _step(message: str) -> AbstractContextManager[None]:
    from patchit.cli.context import step

    return step(message)


def _print_healed(outcome: HealOutcome) -> None:
    from patchit.cli.context import print_healed

    print_healed(outcome)


def _snapshot(repo: Path, head: str, work: UncommittedWork) -> WorkSnapshot | None:
    """The uncommitted work as a commit, healed instead of HEAD; None (said why: it is then
    recorded, not healed) when git cannot make it."""
    from patchit.intake.worktree_snapshot import take_snapshot

    try:
        return take_snapshot(repo, head, work)
    except PatchitError as exc:
        _say(f"could not snapshot the uncommitted work ({exc}); failures are recorded only")
        return None


def _cannot_heal(project: Path, repo: Path | None, commit: str | None) -> str | None:
    """Why healing is impossible here (dbt still runs), or None."""
    if repo is None:
        return f"{project} is not inside a git repository (commit it to git to be healed)"
    if commit is None:
        return f"the git repository {repo} has no commit yet (commit the project to be healed)"
    return None

"""After a wrapped `dbt` invocation: the wrapper's healing policy.

`patchit dbt -- <args>` runs dbt exactly as asked, then hands what happened here:
- a green full `dbt build` (`patchit.text.dbt_args.is_full_build`) on a clean, committed tree
  records the project's last good commit (only that vouches for every model);
- dbt's own usage errors and runs without readable results heal nothing;
- failed nodes broken by one change (else sharing a cause) become one incident each
  (`patchit.loop.change_groups`); they are healed, unless `--no-heal` was given: then they are
  recorded only;
- a run on uncommitted work (`uncommitted`: its snapshot, `patchit.intake.worktree_snapshot`)
  is healed as a failure of the snapshot commit; its results say nothing about a commit of the
  user's, so no unit run and no last good commit are recorded (nor when no snapshot could be
  made: its failures are then recorded only).

The failures to heal are spooled first (`spool_failures`), before the memory is opened or
anything else is done, taken by this process: a wrapper killed from then on (a cancelled CI
job, the OOM killer) loses nothing, since a worker takes the rows of a dead owner and heals
them. Once the wrapper has healed them they are done; if healing failed, they are given back
to the worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchit.memory.runlog import RunLog, UnitRun, project_key_for
from patchit.text.dbt_args import is_full_build

if TYPE_CHECKING:  # a green run loads none of these: they are imported once dbt has failed
    from patchit.events.model import UniversalFailureEvent
    from patchit.loop.context import Step
    from patchit.loop.loop import HealOutcome
    from patchit.memory import Memory
    from patchit.memory.outcomes import OutcomeStore

Say = Callable[[str], None]


@dataclass(frozen=True)
class DbtRun:
    """One finished dbt invocation, as the wrapper saw it."""

    exit_code: int
    record: dict[str, Any]
    args: list[str]
    project: Path
    repo: Path | None
    commit: str | None
    started: datetime
    dirty: list[str] = field(default_factory=list)
    no_heal: bool = False
    events: list[UniversalFailureEvent] | None = None  # the failed nodes', once read
    spooled: list[int] = field(default_factory=list)  # their spool rows, taken by this run
    uncommitted: dict[str, Any] | None = None  # the snapshot `commit` is, of dirty work

    def heals(self) -> bool:
        unsnapshotted = bool(self.dirty) and self.uncommitted is None
        return not (self.no_heal or unsnapshotted or self.repo is None)


def spool_failures(run: DbtRun, home: Path) -> DbtRun:
    """`run` with its failed nodes' events; when it heals them, spooled first, taken by this
    process (`spooled`), unless dbt's process spooled them already (`patchit.intake.dbt_spool`:
    their ids are in its record). Called before anything else once dbt has exited. Runs that
    heal nothing (`--no-heal`, uncommitted work that could not be snapshotted) spool nothing: a
    worker would heal them."""
    if run.exit_code == 0 or not run.record or run.record.get("usage_error"):
        return run
    from patchit.intake.dbt import events_from_run

    events = events_from_run(
        run.record, run.args, run.project, run.repo, run.commit, run.started, run.uncommitted
    )
    if not events or not run.heals():
        return replace(run, events=events)
    spooled = run.record.get("spooled")
    if isinstance(spooled, list) and all(isinstance(i, int) for i in spooled):
        return replace(run, events=events, spooled=spooled)  # dbt's process spooled them
    from patchit.intake.spool import spool_taken
    from patchit.state.liveness import claim_owner

    rows = spool_taken([e.model_dump(mode="json") for e in events], home, claim_owner())
    return replace(run, events=events, spooled=rows or [])


def settle_spooled(home: Path, run: DbtRun, healed: bool) -> None:
    """The run's spool rows once the wrapper is done: done when it healed them, else back to
    pending for a worker (its heal failed: nothing is lost)."""
    if not run.spooled:
        return
    from patchit.intake.spool import Spool

    with Spool.open(home) as spool:
        if healed:
            for row_id in run.spooled:
                spool.mark_done(row_id)
        else:
            spool.release(run.spooled)


def heal_dbt_run(
    run: DbtRun,
    home: Path,
    memory: RunLog | OutcomeStore,
    say: Say,
    on_outcome: Callable[[HealOutcome], None] = lambda _outcome: None,
    step: Step | None = None,
) -> list[HealOutcome]:
    """Apply the policy above to `run`; heal what it allows, each outcome as it comes.

    `memory` may be the `RunLog` a green run writes to (no sqlite-utils, no models); a failure
    opens the whole `Memory` (or shares an open store's connection)."""
    if run.exit_code == 0:
        good = run.repo and run.commit and not run.dirty and is_full_build(run.args)
        last_good = (project_key_for(run.repo, run.project), str(run.commit)) if good else None
        runtime = run.record.get("runtime") if run.record else None
        types = run.record.get("source_types") if run.record else None
        record_green(memory, unit_runs(run, []), last_good,
                     runtime if isinstance(runtime, str) else None,
                     types if isinstance(types, str) else None)  # fmt: skip
        return []
    if run.record.get("usage_error"):
        return []  # dbt printed its usage error; nothing ran, nothing to heal
    if not run.record:
        say(f"dbt exited {run.exit_code} without a result patchit could read; nothing to heal")
        return []
    return _heal_failed(run, home, memory, say, on_outcome, step)


def _heal_failed(
    run: DbtRun,
    home: Path,
    store: RunLog | OutcomeStore,
    say: Say,
    on_outcome: Callable[[HealOutcome], None],
    step: Step | None,
) -> list[HealOutcome]:
    from patchit.memory import Memory

    if isinstance(store, RunLog):
        with Memory.open(store.home, store.busy_timeout_s) as memory:
            return _heal_events(run, home, memory, say, on_outcome, step)
    return _heal_events(run, home, Memory.sharing(store), say, on_outcome, step)


def _heal_events(
    run: DbtRun,
    home: Path,
    memory: Memory,
    say: Say,
    on_outcome: Callable[[HealOutcome], None],
    step: Step | None,
) -> list[HealOutcome]:
    from patchit.intake.dbt import events_from_run
    from patchit.loop.context import build_context
    from patchit.loop.loop import group_by_change, heal_group
    from patchit.loop.recovery import sweep_dead_runs

    events = run.events
    if events is None:
        events = events_from_run(
            run.record, run.args, run.project, run.repo, run.commit, run.started, run.uncommitted
        )
    if not events:
        say(f"dbt exited {run.exit_code} but no node of this run failed; nothing to heal")
        return []
    record_unit_runs(run, memory, events)
    say(f"{len(events)} failed node(s): " + ", ".join(e.unit_id for e in events[:5]))
    if not run.heals() or run.repo is None:
        record_only(events, memory, _why_not(run))
        say(f"recorded, not healing: {_why_not(run)}")
        return []
    if run.uncommitted is not None:
        say(f"healing {_uncommitted_line(run.uncommitted)}: your working tree, index and "
            "stash are left as they are")  # fmt: skip
    ctx = build_context(home, run.repo, memory=memory, say=say, step=step)
    if line := sweep_dead_runs(home, memory, ctx.owner).summary():
        say(line)
    outcomes = []
    try:
        for group in group_by_change(events, memory):
            if len(group.events) > 1:
                say(group.describe())
            outcomes.append(heal_group(group.events, ctx, group.key))
            on_outcome(outcomes[-1])
    finally:
        ctx.close()
    return outcomes


PASSED = {"success", "pass"}


def record_green(
    memory: RunLog | OutcomeStore,
    runs: list[UnitRun],
    last_good: tuple[str, str] | None,
    runtime: str | None = None,
    source_types: str | None = None,
) -> None:
    """A green run's record; through the whole store when the run log cannot write it."""
    if isinstance(memory, RunLog):
        if memory.record_green(runs, last_good, runtime, source_types):
            return
        from patchit.memory.outcomes import OutcomeStore

        with OutcomeStore.open(memory.home, memory.busy_timeout_s) as store:
            store.record_green(runs, last_good, runtime, source_types)
        return
    memory.record_green(runs, last_good, runtime, source_types)


def record_unit_runs(run: DbtRun, memory: Memory, events: list[UniversalFailureEvent]) -> None:
    """Each node's result at this commit, for outcome tracking (`patchit track`)."""
    memory.record_unit_runs(unit_runs(run, events))


def unit_runs(run: DbtRun, events: list[UniversalFailureEvent]) -> list[UnitRun]:
    """Each node's result at this commit (`events`: the failed ones). Runs on uncommitted
    changes say nothing about a commit and are not recorded."""
    if run.repo is None or run.commit is None or run.dirty:
        return []
    failed: dict[str, str] = {}
    if events:
        from patchit.memory.fingerprint import error_fingerprint

        failed = {e.unit_id: error_fingerprint(e) for e in events}
    runs = [
        UnitRun(
            str(run.repo), uid, run.commit, passed=status in PASSED, fingerprint=failed.get(uid, "")
        )
        for result in run.record.get("results", [])
        if (uid := str(result.get("unique_id") or ""))
        and ((status := str(result.get("status", "")).lower()) in PASSED or uid in failed)
    ]
    seen = {r.unit_id for r in runs}  # a parse error fails a file or the project, not a node
    runs += [
        UnitRun(str(run.repo), u, run.commit, False, f) for u, f in failed.items() if u not in seen
    ]
    return runs


def record_only(events: list[UniversalFailureEvent], memory: Memory, why: str) -> None:
    """Open (or attach to) each failure's incident without healing it, grouped as a heal
    would group them (a later heal of the same failures finds these incidents); a new one
    says why it was not healed, and how to heal it."""
    from patchit.loop.loop import group_by_change
    from patchit.memory.fingerprint import error_fingerprint
    from patchit.memory.records import recorded_only_summary

    for group in group_by_change(events, memory):
        first, *others = group.events
        incident, created = memory.open_or_attach(first, error_fingerprint(first), group.key)
        if created:
            memory.update_incident(incident.id, summary=recorded_only_summary(incident.id, why))
        attached = [(e, error_fingerprint(e)) for e in others]
        if attached:
            memory.attach_events(incident.id, attached, group.key)


def _why_not(run: DbtRun) -> str:
    if run.no_heal:
        return "--no-heal was given"
    if run.dirty:
        return (
            f"uncommitted changes ({', '.join(run.dirty[:3])}) could not be snapshotted; "
            "commit them and re-run"
        )
    return "not inside a git repository"


def _uncommitted_line(uncommitted: dict[str, Any]) -> str:
    from patchit.intake.worktree_snapshot import snapshot_of_context

    snapshot = snapshot_of_context(uncommitted)
    return snapshot.describe() if snapshot else "uncommitted work"

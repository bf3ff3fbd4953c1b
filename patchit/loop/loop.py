"""The closed loop: intake -> evidence -> classify -> propose -> pre-check -> verify -> sync/stop.

`heal()` is the design's steps in order and owns the run's state. Each stage is a call that
takes values and returns values: `patchit.loop.search` proposes, pre-checks and verifies and
returns a `Search`; `patchit.loop.trial.land` puts the winner on a branch; a stop is a returned
reason that ends in the Root Cause Report. Nothing below this module imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass, Verdict
from patchit.delivery.approval import auto_deliver
from patchit.delivery.notify import notify
from patchit.errors import MemoryStoreError, PatchitError, VcsError
from patchit.events.model import FailureSource, UniversalFailureEvent, repo_identity
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.model import Evidence
from patchit.evidence.pg_columns import postgres_output
from patchit.evidence.run_order import built_after_read, built_after_read_pg
from patchit.evidence.runtime import runtime_change
from patchit.evidence.type_drift import source_type_changes
from patchit.fidelity.ahead import BaselineAhead
from patchit.fidelity.check import remembered_commit
from patchit.harnesses.base import Harness
from patchit.harnesses.registry import select_harness
from patchit.loop.break_nodes import with_break_nodes
from patchit.loop.change_groups import FailureGroup, Known, LastGood, group_failures, incident_key
from patchit.loop.context import Context, remembered_last_good
from patchit.loop.faults import checkpoint
from patchit.loop.known_failing import with_known_failing
from patchit.loop.landing import Landing, land
from patchit.loop.recurrence import branch_here, needs_recheck, new_cause, no_longer_fails
from patchit.loop.search import Search, recorded_search, search_fix
from patchit.loop.trial import LEASE_TTL_S, Bench, Trial, baseline_work
from patchit.memory import Incident, IncidentStatus, Memory
from patchit.memory.fingerprint import error_fingerprint
from patchit.memory.ledger import Ledger, LlmPurpose
from patchit.memory.outcomes import project_key_for as project_key_for  # re-exported
from patchit.memory.records import RECORDED_ONLY
from patchit.patching.base import FixIt
from patchit.patching.llm import BudgetExhausted, LlmUnavailable, llm_enabled, second_opinion
from patchit.policy.settings import project_key as project_key  # re-exported
from patchit.reports.build import build_report
from patchit.reports.model import LlmSummary
from patchit.reports.refresh import refresh_report
from patchit.reports.render import write_report
from patchit.sandbox.dbt_profile import resolve_dbt_target, unsupported_sandbox
from patchit.sandbox.git import dirty_tracked_files, head_commit
from patchit.sandbox.pg_role import CannotVerifySafely
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import (
    create_worktree,
    remove_tree,
    remove_worktree,
    remove_worktrees_under,
)

NOT_CODE = "classified as {cls}: patchit only patches code bugs"


@dataclass
class HealOutcome:
    incident: Incident
    created: bool
    commands: list[str] = field(default_factory=list)


def heal(
    event: UniversalFailureEvent, ctx: Context, key: str | None = None, attaching: bool = False
) -> HealOutcome:
    """Heal one failure; `key` groups it with others (a breaking change, an outage storm),
    else the key of its own change or cause (`change_groups.incident_key`). `attaching`: the
    caller attaches more events to the incident and re-renders its report after (a
    recurrence's report is not rendered twice: a storm's batches each attach one)."""
    ctx = ctx.judged_by(event)  # the operator's settings, narrowed by the repo's at last good
    fingerprint = error_fingerprint(event)
    key = key or incident_key(event, _last_good_of(ctx.memory), _known_of(ctx.memory))
    incident, created = ctx.memory.open_or_attach(event, fingerprint, key)
    if not created and needs_recheck(incident, event, ctx.memory):
        incident, created = _split_new_cause(incident, event, fingerprint, key, ctx)
    repo = Path(event.repo_path or ".")
    if (busy := _not_ours(incident, created, ctx, repo, attaching)) is not None:
        return busy
    evidence: Evidence | None = None
    verdict: Verdict | None = None
    try:
        with (
            _sandbox(ctx, repo, incident.id) as sandbox,
            _failing_tree(ctx, event, repo, incident.id) as tree,
        ):
            unsupported = _unsupported_warehouse(event)
            # a fix verified by a killed run lands without the harness: do not warm it up
            warm = unsupported is None and not ctx.memory.verified_for(incident.id)
            harness = _pick_harness(event, repo, ctx, warm=warm)
            ran = event.status in ("error", "fail")  # it read the warehouse: copy it now
            snapshot = _snapshot(event, sandbox, ctx) if ran else None
            _snapshot_taken(harness, snapshot)
            last_good = ctx.memory.last_good(project_key(event))
            evidence = _gather_evidence(event, tree, ctx, last_good, snapshot)
            last_good = evidence.last_good_commit  # None when on another branch's line
            verdict = _classify(evidence, ctx, incident.id)
            if verdict.cls is not FailureClass.CODE_BUG:
                stop = NOT_CODE.format(cls=verdict.cls.value)
                return _finish(ctx, event, incident, created, "escalated", stop, evidence, verdict)
            if unsupported is not None:  # say what the fix-its suggest, verify nothing
                stop = _unverified(unsupported, evidence, ctx)
                return _finish(ctx, event, incident, created, "escalated", stop, evidence, verdict)
            if isinstance(harness, PatchitError):
                raise harness  # no harness can verify a candidate: say why, with a report
            snapshot = snapshot or _snapshot(event, sandbox, ctx)
            snapshot_dir = snapshot.parent if snapshot else None
            event = with_known_failing(ctx.memory, event)  # set aside when they fail again
            event = with_break_nodes(event, evidence)  # rebuilt when the run built nothing
            ahead = BaselineAhead(event, repo, harness, snapshot_dir, baseline_work(sandbox),
                                  remembered_commit(evidence, last_good))  # fmt: skip
            bench = Bench(ctx, event, incident.id, fingerprint, evidence, repo, harness,
                          snapshot_dir, sandbox, last_good, ahead)  # fmt: skip
            if (gone := no_longer_fails(bench)) is not None:
                return _finish(ctx, event, incident, created, "escalated", gone, evidence, verdict)
            # a fix an earlier run verified but was killed before landing lands now
            try:
                search = recorded_search(bench) or search_fix(bench, ctx.strategies)
            finally:
                ahead.wait()  # a baseline still building uses the sandbox removed below
            landing = land(bench, search.winner) if search.winner is not None else None
            status = _status(search, ctx, incident.id)
            return _finish(ctx, event, incident, created, status, search.stop, evidence, verdict,
                           search, landing)  # fmt: skip
    except PatchitError as exc:  # the incident must not be lost half-way: stop with a report
        if isinstance(exc, MemoryStoreError) and exc.retryable:
            raise  # a memory write cut off and rolled back: the caller heals it again
        if isinstance(exc, CannotVerifySafely):  # nothing ran: a human verifies, or grants
            stop = _unverified(str(exc), evidence, ctx) if evidence is not None else str(exc)
            return _finish(ctx, event, incident, created, "escalated", stop, evidence, verdict)
        stop = f"patchit could not finish: {exc}"
        ctx.say(stop)
        return _finish(ctx, event, incident, created, "failed", stop, evidence, verdict)
    finally:
        ctx.memory.release_incident(incident.id, ctx.owner)


def heal_group(
    events: list[UniversalFailureEvent],
    ctx: Context,
    key: str | None = None,
    refresh: Callable[[str], object] | None = None,
) -> HealOutcome:
    """Heal the failed units of one incident (`group_by_change`, whose key is `key`) together:
    the first is classified, every candidate is verified on all of them (`related_units`),
    and the others are attached to it. `refresh(incident_id)` re-renders its report once they
    are (default: at once; the worker renders a storm's report once, not at each batch)."""
    primary = events[0]
    related = [u for u in dict.fromkeys(e.unit_id for e in events[1:]) if u != primary.unit_id]
    if related:
        primary = primary.model_copy(
            update={"context": {**primary.context, "related_units": related}}
        )
    attached = [(other, error_fingerprint(other)) for other in events[1:]]
    outcome = heal(primary, ctx, key, attaching=bool(attached))
    if attached:
        ctx.memory.attach_events(outcome.incident.id, attached, outcome.incident.cause_key)
        if refresh is None:
            refresh_report(ctx.memory, outcome.incident.id)
        else:
            refresh(outcome.incident.id)
    return outcome


def group_by_change(events: Iterable[UniversalFailureEvent], memory: Memory) -> list[FailureGroup]:
    """Failed units of one run that one breaking change broke become one incident; units the
    change does not touch, one per cause (`change_groups.group_failures`)."""
    return group_failures(events, _last_good_of(memory), _known_of(memory))


def _last_good_of(memory: Memory) -> LastGood:
    return lambda event: remembered_last_good(memory, event)


def _known_of(memory: Memory) -> Known:
    def known(events: list[UniversalFailureEvent], any_commit: bool) -> str | None:
        first = events[0]
        return memory.key_of_failure(
            list(dict.fromkeys(error_fingerprint(e) for e in events)), first.repo_path,
            repo_identity(first), None if any_commit else first.commit,
        )  # fmt: skip

    return known


# -- the steps ------------------------------------------------------------------------------


def _not_ours(
    incident: Incident, created: bool, ctx: Context, repo: Path, attaching: bool = False
) -> HealOutcome | None:
    """Why this run must not heal the incident (finished, or leased elsewhere), else None."""
    if not created and incident.status != "open":
        if not attaching:  # else the caller re-renders it once its events are attached
            refresh_report(ctx.memory, incident.id)  # its events, the latest commit
        ctx.say(
            f"recurrence of incident {incident.id} ({incident.status}): event attached, "
            "no new attempt"
        )
        shown = branch_here(incident, repo, ctx.memory)
        if incident.branch and shown.branch is None:
            ctx.say(f"its fix branch {incident.branch} is not in {repo} (deleted, or the "
                    "repository was re-created): see the incident's report")  # fmt: skip
        return HealOutcome(shown, created=False)
    if not ctx.memory.claim_incident(incident.id, ctx.owner, ttl_s=LEASE_TTL_S):
        ctx.say(f"incident {incident.id} is being healed by another worker: event attached")
        return HealOutcome(incident, created=created)
    # another worker may have finished it between the attach and the claim (its lease gone)
    current = ctx.memory.get_incident(incident.id)
    if current.status != "open":
        ctx.memory.release_incident(incident.id, ctx.owner)
        refresh_report(ctx.memory, incident.id)
        ctx.say(f"incident {incident.id} was {current.status} meanwhile: event attached")
        return HealOutcome(current, created=False)
    if current.summary.startswith(RECORDED_ONLY):  # a record-only run's: healed now
        ctx.memory.update_incident(incident.id, summary="")
    checkpoint("claimed")
    return None


@contextmanager
def _sandbox(ctx: Context, repo: Path, incident_id: str) -> Iterator[Path]:
    """The incident's scratch dir, removed afterwards (database copies are large)."""
    # left by a run of this incident that was killed; we hold the lease now
    for stale in (ctx.home / "worktrees").glob(f"{incident_id}-*"):
        remove_worktree(repo, stale)
    sandbox = ctx.home / "sandboxes" / incident_id
    remove_tree(sandbox)
    for area in ("worktrees", "sandboxes"):  # git's records whose directories are gone
        with suppress(VcsError):
            remove_worktrees_under(repo, ctx.home / area, incident_id)
    try:
        yield sandbox
    finally:
        for harness in ctx.harnesses:  # e.g. the incident's Postgres sandbox schemas
            release = getattr(harness, "release", None)  # a plugin written before release()
            if release is not None:
                release(sandbox)
        remove_tree(sandbox)


def _pick_harness(
    event: UniversalFailureEvent, repo: Path, ctx: Context, warm: bool = True
) -> Harness | PatchitError:
    """The harness that will verify, warmed up while evidence is gathered; or why there is
    none (that matters only once there is a code bug to verify)."""
    try:
        harness = select_harness(event, repo, ctx.harnesses, config=ctx.config.sandbox)
    except PatchitError as exc:
        return exc
    if warm and event.status != "fail":  # a failing data test is rarely a code bug: no warm-up
        harness.warm_up(event)
    return harness


def _unsupported_warehouse(event: UniversalFailureEvent) -> str | None:
    """Why a dbt run's warehouse has no sandbox (a Postgres target), or None."""
    if event.source is not FailureSource.DBT or event.dbt is None:
        return None
    try:
        return unsupported_sandbox(resolve_dbt_target(event))
    except PatchitError:
        return None  # the harness says what is wrong with the profile, when it matters


def _unverified(unsupported: str, evidence: Evidence, ctx: Context) -> str:
    """The stop line for a warehouse without a sandbox, with the first deterministic fix-it's
    candidate as an unverified suggestion."""
    ctx.say(unsupported)
    for strategy in ctx.strategies:
        if not isinstance(strategy, FixIt):
            continue
        try:
            candidates = strategy.fix(evidence, [])
        except Exception as exc:  # a suggestion must not turn the escalation into a traceback
            ctx.say(f"{strategy.name}: no suggestion ({type(exc).__name__}: {exc})")
            continue
        if candidates:
            found = candidates[0]
            suggestion = f"unverified suggestion ({found.strategy}): {found.rationale}"
            ctx.say(suggestion)
            return f"{unsupported}; {suggestion}"
    return unsupported


def _snapshot(event: UniversalFailureEvent, sandbox: Path, ctx: Context) -> Path | None:
    """Copy the user's DuckDB file (after their dbt exited) once per incident."""
    if event.dbt is None:
        return None
    try:
        target = resolve_dbt_target(event)
    except PatchitError as exc:
        ctx.say(f"no database snapshot: {exc}")
        return None
    if target.db_path is None or not target.db_path.is_file():
        return None
    return snapshot_database(target.db_path, sandbox / "snapshot")


def _snapshot_taken(harness: Harness | PatchitError, snapshot: Path | None) -> None:
    """Tell a harness that reads the incident's snapshot ahead (`snapshot_taken`) it is made."""
    taken = getattr(harness, "snapshot_taken", None)
    if snapshot is not None and callable(taken):
        taken(snapshot)


def _split_new_cause(
    incident: Incident,
    event: UniversalFailureEvent,
    fingerprint: str,
    key: str,
    ctx: Context,
) -> tuple[Incident, bool]:
    """Classify a recurrence from a new commit (rules only); when its class is not the
    finished incident's, it becomes an incident of its own: (incident, created)."""
    repo = Path(event.repo_path or ".")
    try:
        with _failing_tree(ctx, event, repo, f"{incident.id}-recheck") as tree:
            evidence = _gather_evidence(event, tree, ctx, ctx.memory.last_good(project_key(event)),
                                        None)  # fmt: skip
    except PatchitError as exc:
        ctx.say(f"could not re-examine the recurrence ({exc}): attached to {incident.id}")
        return incident, False
    verdict = classify_failure(evidence)
    if not new_cause(incident, verdict.cls.value):
        return incident, False
    fresh = ctx.memory.split_event(incident.id, event, fingerprint, key)
    refresh_report(ctx.memory, incident.id)  # one event fewer
    ctx.say(f"{event.short()}: the same failure as incident {incident.id} "
            f"({incident.classification}) but now {verdict.cls.value} at "
            f"{str(event.commit)[:12]}: a new incident {fresh.id}")  # fmt: skip
    return fresh, True


@contextmanager
def _failing_tree(
    ctx: Context, event: UniversalFailureEvent, repo: Path, incident_id: str
) -> Iterator[Path]:
    """The code at the failing commit, for evidence and strategies to read while the incident
    is healed: the user's tree when it still shows that commit, else a worktree removed
    afterwards (the user may have committed more work since)."""
    if event.commit is None or (
        head_commit(repo) == event.commit and not dirty_tracked_files(repo)
    ):
        yield repo
        return
    dest = ctx.home / "worktrees" / f"{incident_id}-evidence"
    worktree = create_worktree(repo, event.commit, dest)
    try:
        yield worktree
    finally:
        remove_worktree(repo, worktree)


def _gather_evidence(
    event: UniversalFailureEvent,
    root: Path,
    ctx: Context,
    last_good: str | None,
    snapshot: Path | None,
) -> Evidence:
    ctx.say("gathering evidence")
    if event.source is FailureSource.AIRFLOW:
        return gather_airflow_evidence(event, root, last_good_commit=last_good)
    evidence = gather_dbt_evidence(event, root, last_good_commit=last_good, db_snapshot=snapshot)
    evidence.runtime_change = runtime_change(
        ctx.memory.last_good_runtime(project_key(event)), event
    )
    if event.status == "error":  # a relation the same run built after the unit read it
        evidence.built_in_run = built_after_read(evidence.error, snapshot, evidence.notes) or (
            built_after_read_pg(evidence.error, postgres_output(event), evidence.notes)
            if snapshot is None and 'relation "' in evidence.error
            else ""
        )
    if event.status == "error" and snapshot is not None:  # a source's column changed type
        recorded = ctx.memory.last_good_source_types(project_key(event))
        evidence.type_changes += source_type_changes(event, recorded, snapshot, evidence.notes)
    return evidence


def _classify(evidence: Evidence, ctx: Context, incident_id: str) -> Verdict:
    """The rules, and where they say `unknown`, the model's second opinion (never over a
    matched signature)."""
    verdict = classify_failure(evidence)
    cfg = ctx.config.llm
    if verdict.cls is FailureClass.UNKNOWN and cfg.second_opinion and llm_enabled(cfg):
        ctx.say("rules say unknown: asking the model for a second opinion")
        try:
            verdict = second_opinion(evidence, verdict, cfg, ctx.memory, incident_id)
        except (BudgetExhausted, LlmUnavailable) as exc:
            ctx.say(f"no second opinion: {exc}")
            verdict = verdict.model_copy(
                update={"reason": f"{verdict.reason} (the model's second opinion failed: {exc})"}
            )
    ctx.say(f"classified as {verdict.cls.value}: {verdict.reason}")
    ctx.memory.update_incident(
        incident_id, classification=verdict.cls.value, summary=verdict.reason
    )
    return verdict


def _status(search: Search, ctx: Context, incident_id: str) -> str:
    """fixed; escalated when only policy refused, a passing candidate needs review, or nothing
    can be verified here; failed otherwise."""
    if search.winner is not None:
        return "fixed"
    verified_any = any(a.outcome != "refused" for a in ctx.memory.attempts_for(incident_id))
    only_policy = search.policy_refusals > 0 and not verified_any
    escalate = only_policy or search.needs_review or search.cannot_verify
    return "escalated" if escalate else "failed"


def _finish(
    ctx: Context,
    event: UniversalFailureEvent,
    incident: Incident,
    created: bool,
    status: str,
    stop: str,
    evidence: Evidence | None,
    verdict: Verdict | None,
    search: Search | None = None,
    landing: Landing | None = None,
) -> HealOutcome:
    """Write the report (Root Cause Report when nothing landed), then record the outcome and
    the report in one update: a run killed in between leaves the incident open, resumable."""
    branch = landing.branch if landing else None
    incident = ctx.memory.get_incident(incident.id).model_copy(
        update={"status": IncidentStatus(status), "branch": branch}
    )
    winner = search.winner if search else None
    trials = search.trials if search else []
    # held for review by its data check or by its candidate's own review (a guessed name)
    refused = [t.data for t in trials if t.data is not None and t.needs_review]
    report = build_report(
        incident=incident,
        event=event,
        evidence=evidence,
        verdict=verdict,
        attempts=ctx.memory.attempts_for(incident.id),
        winner=(winner.candidate, winner.diff, winner.result) if winner and winner.result else None,
        stop_reason="" if winner else stop,
        commands=landing.commands if landing else [],
        events=len(ctx.memory.events_for(incident.id)),
        tiers=search.tiers if search else [],
        data_check=winner.data if winner else (refused[-1] if refused else None),
        llm=_llm_summary(ctx, incident.id, trials),
        unit_verdicts=next((t.result.units for t in reversed(trials) if t.result), None),
    )
    md, js = write_report(report, ctx.home / "reports")
    checkpoint("finished")
    incident = ctx.memory.transition(
        incident.id,
        status,  # the trigger is named as the state it leads to (lifecycle.TRANSITIONS)
        branch=branch,
        report_md=str(md),
        report_json=str(js),
        needs_human=report.needs_human,
    )
    auto_deliver(incident, ctx.memory, ctx.say, ctx.config)  # [delivery] mode: PR, or a human
    incident = ctx.memory.get_incident(incident.id)
    notify(incident, ctx.config.notify, ctx.memory, landing.commands if landing else [])
    return HealOutcome(incident, created=created, commands=landing.commands if landing else [])


def _llm_summary(ctx: Context, incident_id: str, trials: list[Trial]) -> LlmSummary | None:
    calls = Ledger(ctx.memory).calls_for(incident_id)
    if not calls:
        return None
    rounds = {c.round for c in calls if c.purpose is LlmPurpose.PROPOSE}
    return LlmSummary(
        model=calls[-1].model,
        rounds=max(rounds, default=0),
        calls=len(calls),
        candidates=sum(1 for t in trials if t.candidate.tier >= 1),
        tokens_in=sum(c.tokens_in for c in calls),
        tokens_out=sum(c.tokens_out for c in calls),
        cost_usd=sum(c.cost_usd for c in calls),
    )

"""The closed loop: intake -> evidence -> classify -> propose -> pre-check -> verify -> sync/stop.

`heal()` is the design's steps in order and nothing else; the pieces live in the stages.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from patchit.candidates import try_candidates
from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass, Verdict
from patchit.config import PatchitConfig
from patchit.errors import PatchitError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.model import Evidence
from patchit.fidelity import DataCheck
from patchit.harnesses.base import Harness, Verification
from patchit.harnesses.registry import select_harness
from patchit.memory import Incident, Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from patchit.memory.ledger import Ledger
from patchit.patching.base import PatchCandidate, Strategy
from patchit.patching.llm import BudgetExhausted, LlmUnavailable, llm_enabled, second_opinion
from patchit.reports.build import build_report
from patchit.reports.model import LlmSummary
from patchit.reports.render import write_report
from patchit.sandbox.dbt_profile import resolve_dbt_target
from patchit.sandbox.git import dirty_tracked_files, head_commit
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.trial import Trial

Say = Callable[[str], None]


@dataclass
class Context:
    """What one healing run needs: state dir, memory, config and the plugins."""

    home: Path
    memory: Memory
    config: PatchitConfig
    strategies: list[Strategy]
    harnesses: list[Harness]
    say: Say = field(default=lambda _msg: None)
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")

    def close(self) -> None:
        for harness in self.harnesses:
            harness.close()


@dataclass
class HealOutcome:
    incident: Incident
    created: bool
    commands: list[str] = field(default_factory=list)


def project_key_for(repo: Path | str | None, project: Path | str) -> str:
    """Key of a project's last good commit in memory."""
    return f"{repo}::{project}"


def project_key(event: UniversalFailureEvent) -> str:
    return project_key_for(
        event.repo_path, event.dbt.project_dir if event.dbt else event.pipeline_id
    )


def group_by_cause(events: Iterable[UniversalFailureEvent]) -> list[list[UniversalFailureEvent]]:
    """Failed units of one invocation that share a cause become one incident."""
    groups: dict[str, list[UniversalFailureEvent]] = {}
    for event in events:
        groups.setdefault(cause_key(event), []).append(event)
    return list(groups.values())


def heal_group(
    events: list[UniversalFailureEvent], ctx: Context, key: str | None = None
) -> HealOutcome:
    primary = events[0]
    related = [e.unit_id for e in events[1:]]
    if related:
        primary = primary.model_copy(
            update={"context": {**primary.context, "related_units": related}}
        )
    outcome = heal(primary, ctx, key)
    by_key: dict[str, list[tuple[UniversalFailureEvent, str]]] = {}
    for other in events[1:]:
        by_key.setdefault(key or cause_key(other), []).append((other, error_fingerprint(other)))
    for group_key, attached in by_key.items():
        ctx.memory.attach_events(outcome.incident.id, attached, group_key)
    return outcome


def heal(event: UniversalFailureEvent, ctx: Context, key: str | None = None) -> HealOutcome:
    """Heal one failure; `key` groups it with others (an outage storm), else its cause key."""
    fingerprint = error_fingerprint(event)
    incident, created = ctx.memory.open_or_attach(event, fingerprint, key or cause_key(event))
    if not created and incident.status != "open":
        ctx.say(
            f"recurrence of incident {incident.id} ({incident.status}): event attached, "
            "no new attempt"
        )
        return HealOutcome(incident, created=False)
    if not ctx.memory.claim_incident(incident.id, ctx.owner, ttl_s=3600):
        ctx.say(f"incident {incident.id} is being healed by another worker: event attached")
        return HealOutcome(incident, created=created)
    run = _Run(event, incident, fingerprint)
    try:
        return _heal_claimed(run, ctx, created)
    except PatchitError as exc:
        # the incident must not be lost half-way: stop it with a report saying what broke
        run.stop_reason = f"patchit could not finish: {exc}"
        ctx.say(run.stop_reason)
        return _finish(run, "failed", ctx, created)
    finally:
        ctx.memory.release_incident(incident.id, ctx.owner)


@dataclass
class _Run:
    """Mutable state of one healing run, for the report."""

    event: UniversalFailureEvent
    incident: Incident
    fingerprint: str
    evidence: Evidence | None = None
    verdict: Verdict | None = None
    stop_reason: str = ""
    winner: tuple[PatchCandidate, str, Verification] | None = None
    branch: str | None = None
    commands: list[str] = field(default_factory=list)
    policy_refusals: int = 0
    last_good: str | None = None
    tiers: list[str] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    llm_rounds: int = 0
    llm_problems: list[str] = field(default_factory=list)
    cannot_verify: bool = False
    winner_data: DataCheck | None = None


def _heal_claimed(run: _Run, ctx: Context, created: bool) -> HealOutcome:
    sandbox = ctx.home / "sandboxes" / run.incident.id
    repo = Path(run.event.repo_path or ".")
    for stale in (ctx.home / "worktrees").glob(f"{run.incident.id}-*"):
        remove_worktree(repo, stale)  # left by a run that was killed; we hold the lease now
    try:
        return _heal_in(run, ctx, created, sandbox)
    finally:
        # database copies are large and per-run; the attempts and reports keep what matters
        shutil.rmtree(sandbox, ignore_errors=True)


def _evidence_root(event: UniversalFailureEvent, repo: Path, dest: Path) -> Path | None:
    """A worktree at the failing commit when the user's tree no longer shows it, else None."""
    if event.commit is None:
        return None
    if head_commit(repo) == event.commit and not dirty_tracked_files(repo):
        return None
    return create_worktree(repo, event.commit, dest)


def _heal_in(run: _Run, ctx: Context, created: bool, sandbox: Path) -> HealOutcome:
    event, incident = run.event, run.incident
    # a node that ran reads the warehouse (columns, failing rows); a parse, profile or lock
    # failure does not, and its copy waits until a candidate needs verifying
    repo = Path(event.repo_path or ".")
    if event.status != "fail":  # a failing data test is rarely a code bug: don't warm up
        _warm_up(event, repo, ctx)
    ran = event.status in ("error", "fail")
    snapshot = _snapshot(event, sandbox / "snapshot", ctx) if ran else None
    ctx.say("gathering evidence")
    evidence_wt = _evidence_root(event, repo, ctx.home / "worktrees" / f"{incident.id}-evidence")
    try:
        run.last_good = last_good = ctx.memory.last_good(project_key(event))
        if event.source is FailureSource.AIRFLOW:
            run.evidence = gather_airflow_evidence(
                event, evidence_wt or repo, last_good_commit=last_good
            )
        else:
            run.evidence = gather_dbt_evidence(
                event, evidence_wt or repo, last_good_commit=last_good, db_snapshot=snapshot
            )
        return _decide(run, ctx, created, repo, snapshot, sandbox)
    finally:
        if evidence_wt is not None:
            remove_worktree(repo, evidence_wt)


def _decide(
    run: _Run, ctx: Context, created: bool, repo: Path, snapshot: Path | None, sandbox: Path
) -> HealOutcome:
    incident = run.incident
    assert run.evidence is not None
    run.verdict = _second_opinion(run, ctx, classify_failure(run.evidence))
    ctx.say(f"classified as {run.verdict.cls.value}: {run.verdict.reason}")
    ctx.memory.update_incident(
        incident.id, classification=run.verdict.cls.value, summary=run.verdict.reason
    )
    if run.verdict.cls is not FailureClass.CODE_BUG:
        run.stop_reason = f"classified as {run.verdict.cls.value}: patchit only patches code bugs"
        return _finish(run, "escalated", ctx, created)
    if snapshot is None:
        snapshot = _snapshot(run.event, sandbox / "snapshot", ctx)
    try_candidates(run, repo, snapshot.parent if snapshot else None, sandbox, ctx)
    if run.winner is not None:
        return _finish(run, "fixed", ctx, created)
    verified_any = any(a.outcome != "refused" for a in ctx.memory.attempts_for(incident.id))
    only_policy = run.policy_refusals > 0 and not verified_any
    needs_review = run.winner_data is None and any(
        t.data is not None and t.data.needs_review for t in run.trials
    )
    escalate = only_policy or needs_review or run.cannot_verify
    return _finish(run, "escalated" if escalate else "failed", ctx, created)


def _second_opinion(run: _Run, ctx: Context, verdict: Verdict) -> Verdict:
    """Where the rules say `unknown`, the model may classify (never over a matched signature)."""
    cfg = ctx.config.llm
    if verdict.cls is not FailureClass.UNKNOWN or not cfg.second_opinion or not llm_enabled(cfg):
        return verdict
    assert run.evidence is not None
    ctx.say("rules say unknown: asking the model for a second opinion")
    try:
        return second_opinion(run.evidence, verdict, cfg, ctx.memory, run.incident.id)
    except (BudgetExhausted, LlmUnavailable) as exc:
        ctx.say(f"no second opinion: {exc}")
        return verdict.model_copy(
            update={"reason": f"{verdict.reason} (the model's second opinion failed: {exc})"}
        )


def _warm_up(event: UniversalFailureEvent, repo: Path, ctx: Context) -> None:
    """Start the harness's runtime (seconds of imports) while evidence is gathered."""
    try:
        harness = select_harness(event, repo, ctx.harnesses, config=ctx.config.sandbox)
    except PatchitError:
        return  # verification will say why there is no harness
    start = getattr(harness, "start_in_background", None)
    if callable(start):
        start()


def _snapshot(event: UniversalFailureEvent, dest: Path, ctx: Context) -> Path | None:
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
    return snapshot_database(target.db_path, dest)


def _refused_data(run: _Run) -> DataCheck | None:
    """The data check that kept a passing candidate off the branch, for the report."""
    refused = [t.data for t in run.trials if t.data is not None and t.data.needs_review]
    return refused[-1] if refused else None


def _llm_summary(run: _Run, ctx: Context) -> LlmSummary | None:
    calls = Ledger(ctx.memory).calls_for(run.incident.id)
    if not calls:
        return None
    return LlmSummary(
        model=calls[-1].model,
        rounds=run.llm_rounds,
        calls=len(calls),
        candidates=sum(1 for t in run.trials if t.candidate.tier >= 1),
        tokens_in=sum(c.tokens_in for c in calls),
        tokens_out=sum(c.tokens_out for c in calls),
        cost_usd=sum(c.cost_usd for c in calls),
    )


def _finish(run: _Run, status: str, ctx: Context, created: bool) -> HealOutcome:
    incident = ctx.memory.update_incident(run.incident.id, status=status, branch=run.branch)
    attempts = ctx.memory.attempts_for(run.incident.id)
    report = build_report(
        incident=incident,
        event=run.event,
        evidence=run.evidence,
        verdict=run.verdict,
        attempts=attempts,
        winner=run.winner,
        stop_reason=run.stop_reason,
        commands=run.commands,
        events=len(ctx.memory.events_for(run.incident.id)),
        tiers=run.tiers,
        data_check=run.winner_data or _refused_data(run),
        llm=_llm_summary(run, ctx),
    )
    md, js = write_report(report, ctx.home / "reports")
    incident = ctx.memory.update_incident(
        run.incident.id,
        report_md=str(md),
        report_json=str(js),
        needs_human=report.needs_human,
    )
    return HealOutcome(incident, created=created, commands=run.commands)

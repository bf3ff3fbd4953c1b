"""The closed loop: intake -> evidence -> classify -> propose -> pre-check -> verify -> sync/stop.

`heal()` is the design's steps in order and nothing else; the pieces live in the stages.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass, Verdict
from patchit.config import PatchitConfig
from patchit.errors import PatchitError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.dbt import gather_dbt_evidence
from patchit.evidence.model import Evidence
from patchit.evidence.redact import profile_secrets, redact
from patchit.harnesses.base import Harness, Verification, Workspace
from patchit.harnesses.registry import select_harness
from patchit.memory import Incident, Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from patchit.patching.apply import EditError, apply_edits, preview_edits
from patchit.patching.base import PatchCandidate, Strategy
from patchit.patching.diffs import unified_diff
from patchit.patching.registry import propose_patches
from patchit.policy.precheck import precheck
from patchit.reports.build import build_report
from patchit.reports.render import write_report
from patchit.sandbox.dbt_profile import resolve_dbt_target
from patchit.sandbox.git import dirty_tracked_files, head_commit
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.sync.branch import commit_patch, create_branch, inspect_commands

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
    for other in events[1:]:
        ctx.memory.attach_event(
            outcome.incident.id, other, error_fingerprint(other), key or cause_key(other)
        )
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
        last_good = ctx.memory.last_good(project_key(event))
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
    run.verdict = classify_failure(run.evidence)
    ctx.say(f"classified as {run.verdict.cls.value}: {run.verdict.reason}")
    ctx.memory.update_incident(
        incident.id, classification=run.verdict.cls.value, summary=run.verdict.reason
    )
    if run.verdict.cls is not FailureClass.CODE_BUG:
        run.stop_reason = f"classified as {run.verdict.cls.value}: patchit only patches code bugs"
        return _finish(run, "escalated", ctx, created)
    if snapshot is None:
        snapshot = _snapshot(run.event, sandbox / "snapshot", ctx)
    _try_candidates(run, repo, snapshot.parent if snapshot else None, sandbox, ctx)
    if run.winner is not None:
        return _finish(run, "fixed", ctx, created)
    verified_any = any(a.outcome != "refused" for a in ctx.memory.attempts_for(incident.id))
    only_policy = run.policy_refusals > 0 and not verified_any
    return _finish(run, "escalated" if only_policy else "failed", ctx, created)


def _warm_up(event: UniversalFailureEvent, repo: Path, ctx: Context) -> None:
    """Start the harness's runtime (seconds of imports) while evidence is gathered."""
    try:
        harness = select_harness(event, repo, ctx.harnesses)
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


def _try_candidates(
    run: _Run, repo: Path, snapshot_dir: Path | None, sandbox: Path, ctx: Context
) -> None:
    assert run.evidence is not None
    history = ctx.memory.history(run.fingerprint)
    harness = select_harness(run.event, repo, ctx.harnesses)
    max_attempts = ctx.config.loop.max_attempts
    proposed = 0
    for candidate in propose_patches(run.evidence, history, ctx.strategies):
        proposed += 1
        if ctx.memory.attempt_count(run.fingerprint) >= max_attempts:
            run.stop_reason = f"max attempts ({max_attempts}) for this fingerprint reached"
            return
        number = len(ctx.memory.attempts_for(run.incident.id)) + 1
        # one worktree path per incident, made afresh for each candidate: dbt's saved parse
        # (which names files by absolute path) stays valid from one candidate to the next
        workdir = ctx.home / "worktrees" / f"{run.incident.id}-candidate"
        scratch = sandbox / f"candidate-{number}"
        ctx.say(
            f"candidate {number}: {candidate.strategy} ({candidate.tag}): {candidate.rationale}"
        )
        worktree = create_worktree(repo, run.event.commit or "HEAD", workdir)
        try:
            if _verify_one(run, candidate, worktree, scratch, snapshot_dir, harness, ctx):
                return
        finally:
            remove_worktree(repo, worktree)
            shutil.rmtree(scratch, ignore_errors=True)
    if proposed == 0:
        run.stop_reason = "no strategy proposed a patch for this failure"
    elif not run.stop_reason:
        run.stop_reason = f"none of the {proposed} candidate(s) passed pre-check and verification"


def _verify_one(
    run: _Run,
    candidate: PatchCandidate,
    worktree: Path,
    scratch: Path,
    snapshot_dir: Path | None,
    harness: Harness,
    ctx: Context,
) -> bool:
    memory = ctx.memory
    try:
        previews = preview_edits(worktree, candidate.edits)
    except EditError as exc:
        memory.record_attempt(run.incident.id, run.fingerprint, candidate, "", "refused", str(exc))
        ctx.say(f"  refused: {exc}")
        return False
    diff = "".join(unified_diff(p, before, after) for p, (before, after) in previews.items())
    refusal = precheck(candidate, diff, run.fingerprint, worktree, ctx.config.policy, memory)
    if refusal:
        run.policy_refusals += refusal.startswith("policy")
        memory.record_attempt(run.incident.id, run.fingerprint, candidate, diff, "refused", refusal)
        ctx.say(f"  refused: {refusal}")
        return False
    files = apply_edits(worktree, candidate.edits)
    scratch.mkdir(parents=True, exist_ok=True)
    ctx.say(f"  verifying with the {harness.name} harness")
    started = time.monotonic()
    result = harness.verify(
        Workspace(root=worktree, scratch=scratch, snapshot=snapshot_dir), run.event
    )
    # the sandbox ran with the verbatim --vars; nothing stored or shown may carry their secrets
    raw_vars = run.event.dbt.replay_vars() if run.event.dbt else None
    secrets = profile_secrets(raw_vars) if raw_vars else []
    result = result.model_copy(
        update={
            "command": redact(result.command, secrets),
            "output": redact(result.output, secrets),
        }
    )
    duration_ms = int((time.monotonic() - started) * 1000)
    outcome = "verified" if result.passed else ("harness_limit" if result.limit_hit else "failed")
    reason = "" if result.passed else _failure_reason(result)
    memory.record_attempt(
        run.incident.id,
        run.fingerprint,
        candidate,
        diff,
        outcome,
        reason,
        verification_output=f"$ {result.command}\n{result.output}",
        duration_ms=duration_ms,
    )
    ctx.say(f"  {outcome} in {duration_ms / 1000:.1f} s" + (f": {reason}" if reason else ""))
    if not result.passed:
        return False
    sha = commit_patch(worktree, files, _commit_message(run, candidate))
    repo = Path(run.event.repo_path or ".")
    run.branch = create_branch(repo, run.incident.id, sha)
    run.winner = (candidate, diff, result)
    run.commands = inspect_commands(repo, run.branch, run.event)
    return True


def _failure_reason(result: Verification) -> str:
    if result.limit_hit:
        return f"harness limit hit ({result.limit_hit})"
    if result.failures:
        return "still failing: " + ", ".join(result.failures[:5])
    return "verification did not pass"


def _commit_message(run: _Run, candidate: PatchCandidate) -> str:
    return (
        f"patchit: {candidate.rationale}\n\n"
        f"Incident: {run.incident.id}\n"
        f"Failing unit: {run.event.unit_id}\n"
        f"Strategy: {candidate.strategy} ({candidate.tag}, tier {candidate.tier})\n"
        f"Verified by re-running the unit and its downstream in a sandbox.\n"
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
    )
    md, js = write_report(report, ctx.home / "reports")
    incident = ctx.memory.update_incident(
        run.incident.id,
        report_md=str(md),
        report_json=str(js),
        needs_human=report.needs_human,
    )
    return HealOutcome(incident, created=created, commands=run.commands)

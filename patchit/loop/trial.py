"""One candidate's trial: a fresh worktree at the failing commit, the pre-check (policy,
memory), the harness's screen (milliseconds: a SQL binder, a compiler), the harness, and,
where the harness passed, the data-aware check against the baseline; the attempt is recorded
whatever happens. A verified attempt is recorded with what landing it needs
(`_verified_json`); the winner lands on `patchit/<id>` (`patchit.loop.landing`).
"""

from __future__ import annotations

import json
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from patchit.errors import PatchitWarning
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.intents import change_intents, reverted_intents
from patchit.evidence.model import Evidence
from patchit.evidence.redact import profile_secrets
from patchit.fidelity import DataCheck, check_candidate
from patchit.fidelity.ahead import BaselineAhead
from patchit.fidelity.check import compares_outputs
from patchit.harnesses.base import Harness, Screening, Verification, Workspace
from patchit.loop.context import Context
from patchit.loop.faults import checkpoint
from patchit.loop.known_failing import for_candidate
from patchit.loop.still_failing import meant_by_the_change, still_failing
from patchit.patching.apply import EditError, apply_edits, preview_edits
from patchit.patching.base import PatchCandidate
from patchit.patching.diffs import unified_diff
from patchit.patching.renamed_units import candidate_renames, followed_event
from patchit.policy.intents import held_again, intent_review
from patchit.policy.precheck import precheck
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.text.redaction import Redactor, environment_secrets

_LIMITS = {
    "time": "it ran past the harness time limit (loop.harness_timeout_s)",
    "memory": "it ran out of the sandbox's memory limit (sandbox.memory_mb)",
    "network": "it opened a network connection, which the sandbox blocks",
    "write": "it wrote outside the worktree and its scratch dir",
}
LEASE_TTL_S = 3600.0
CANNOT_VERIFY_NETWORK = (
    "cannot verify: the unit needs the network, which the sandbox blocks; allow it with "
    "`[sandbox] network = true` in $PATCHIT_HOME/patchit.toml if that is safe, or verify by hand"
)


@dataclass
class Trial:
    """One candidate's way through pre-check, harness and data check."""

    candidate: PatchCandidate
    diff: str
    result: Verification | None = None
    data: DataCheck | None = None
    screening: Screening | None = None
    refusal: str = ""  # why the pre-check (or the edit check, or the screen) refused it
    stop: str = ""  # why no candidate can be verified at all (e.g. it needs the network)
    attempt_id: int | None = None  # its row in memory, once verified
    # the intents of the change its edits undo, whatever the policy (`loop.combine` reads them)
    reverts: frozenset[str] = frozenset()

    @property
    def needs_review(self) -> bool:
        """The run passed, but the data check or the candidate itself asks for a human."""
        return (
            self.result is not None
            and self.result.passed
            and (bool(self.candidate.review) or (self.data is not None and self.data.needs_review))
        )

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed and not self.needs_review


@dataclass(frozen=True)
class Bench:
    """What every trial of one incident shares, set once by the loop."""

    ctx: Context
    event: UniversalFailureEvent
    incident_id: str
    fingerprint: str
    evidence: Evidence
    repo: Path
    harness: Harness
    snapshot_dir: Path | None
    sandbox: Path
    last_good: str | None
    # the data check's baseline, built beside the first candidate's verification
    ahead: BaselineAhead | None = None
    # an intent -> the candidate held for review that passed undoing it
    held: dict[str, str] = field(default_factory=dict)


def baseline_work(sandbox: Path) -> Path:
    """Where the incident's data-check baseline is built and kept."""
    return sandbox / "baseline"


def out_of_attempts(bench: Bench) -> str:
    """The stop reason once the fingerprint's attempts are spent, else ""."""
    limit = bench.ctx.config.loop.max_attempts
    if bench.ctx.memory.attempt_count(bench.fingerprint) >= limit:
        return f"max attempts ({limit}) for this fingerprint reached"
    return ""


def run_trial(bench: Bench, candidate: PatchCandidate) -> Trial:
    """Pre-check and verify one candidate in its own worktree; record the attempt."""
    ctx = bench.ctx
    # renew the incident's lease: a long search must not look like a dead run
    ctx.memory.claim_incident(bench.incident_id, ctx.owner, ttl_s=LEASE_TTL_S)
    number = len(ctx.memory.attempts_for(bench.incident_id)) + 1
    ctx.say(f"candidate {number}: {candidate.strategy} ({candidate.tag}): {candidate.rationale}")
    # one worktree path per incident, made afresh for each candidate: dbt's saved parse
    # (which names files by absolute path) stays valid from one candidate to the next
    workdir = ctx.home / "worktrees" / f"{bench.incident_id}-candidate"
    scratch = bench.sandbox / f"candidate-{number}"
    if bench.ahead is not None and compares_outputs(bench.event, bench.harness):
        bench.ahead.prepare()  # the baseline's worktree, beside this candidate's
    worktree = create_worktree(bench.repo, bench.event.commit or "HEAD", workdir)
    try:
        trial = _verify(bench, candidate, worktree, scratch)
    finally:
        remove_worktree(bench.repo, worktree)
        shutil.rmtree(scratch, ignore_errors=True)
    if trial.result is not None and trial.result.limit_hit == "network":
        trial.stop = CANNOT_VERIFY_NETWORK
        ctx.say(trial.stop)
    return trial


def record_refusal(bench: Bench, candidate: PatchCandidate, diff: str, reason: str) -> None:
    """A candidate refused before verification: kept for the report, never counted as tried."""
    bench.ctx.memory.record_attempt(
        bench.incident_id, bench.fingerprint, candidate, diff, "refused", reason
    )
    bench.ctx.say(f"  refused: {reason}")


def _verify(bench: Bench, candidate: PatchCandidate, worktree: Path, scratch: Path) -> Trial:
    ctx, memory = bench.ctx, bench.ctx.memory
    try:
        previews = preview_edits(worktree, candidate.edits)
    except EditError as exc:
        record_refusal(bench, candidate, "", str(exc))
        return Trial(candidate, "", refusal=str(exc))
    diff = "".join(unified_diff(p, before, after) for p, (before, after) in previews.items())
    trial = Trial(candidate, diff)
    refusal = precheck(candidate, diff, bench.fingerprint, worktree, ctx.config.policy, memory,
                       bench.incident_id)  # fmt: skip
    if refusal:
        record_refusal(bench, candidate, diff, refusal)
        trial.refusal = refusal
        return trial
    reverted = reverted_intents(change_intents(bench.evidence), previews)  # read once, used twice
    candidate = trial.candidate = intent_review(candidate, previews, bench.evidence,
                                                ctx.config.policy, ctx.say, reverted)  # fmt: skip
    trial.reverts = frozenset(i.description for i in reverted)
    undone = frozenset() if ctx.config.policy.revert == "allow" else trial.reverts
    if again := sorted(undone & bench.held.keys()):
        trial.refusal = held_again(again[0], bench.held[again[0]])
        record_refusal(bench, candidate, diff, trial.refusal)
        return trial
    if bench.ahead is not None and bench.ahead.started:  # prepared by run_trial
        # the incident's baseline, from the first candidate policy and memory let through:
        # it builds while this one is applied, screened and verified (no-op after the first,
        # or for a one-at-a-time harness)
        bench.ahead.start()
    files = apply_edits(worktree, candidate.edits)
    scratch.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(root=worktree, scratch=scratch, snapshot=bench.snapshot_dir)
    trial.screening = _screen(bench, workspace, files)
    if not trial.screening.passed:
        _screened_out(bench, trial, trial.screening)
        return trial
    started = time.monotonic()
    with ctx.long_step(f"  verifying with the {bench.harness.name} harness"):
        # a test named after a column the candidate renames runs under its new name
        followed = followed_event(bench.event, candidate_renames(candidate))
        followed = for_candidate(followed, files)  # what it edits is judged like any node
        verified = bench.harness.verify(workspace, followed)
    trial.result = _redacted(bench.event, verified)
    if trial.result.passed:
        trial.data = _data_check(bench, workspace, trial.result)
    duration_ms = int((time.monotonic() - started) * 1000)
    outcome, reason = _judge(trial)
    if outcome == "failed" and trial.result.failures:
        reason += meant_by_the_change(trial.result, change_intents(bench.evidence))
    for intent in undone if outcome == "needs_review" else ():
        bench.held.setdefault(intent, f"{candidate.strategy} ({candidate.tag})")
    checkpoint("before-record")
    trial.attempt_id = memory.record_attempt(
        bench.incident_id,
        bench.fingerprint,
        candidate,
        diff,
        outcome,
        reason,
        verification_output=_verification_text(trial),
        duration_ms=duration_ms,
        commit=bench.event.commit,
        verified_json=_verified_json(trial) if outcome == "verified" else None,
    )
    if outcome == "verified":
        checkpoint("verified")
    ctx.say(f"  {outcome} in {duration_ms / 1000:.1f} s" + (f": {reason}" if reason else ""))
    return trial


def _screen(bench: Bench, workspace: Workspace, files: list[str]) -> Screening:
    """The harness's screen of the patched worktree; one that raises has judged nothing."""
    try:
        screening = bench.harness.screen(workspace, bench.event, files)
    except Exception as exc:  # a faulty screen must not keep a candidate from its verify
        warnings.warn(
            f"the {bench.harness.name} harness's screen failed on {bench.event.short()}: {exc!r}",
            PatchitWarning,
            stacklevel=2,
        )
        return Screening.nothing(f"the screen failed: {exc!r}")
    redactor = event_redactor(bench.event)
    screening = screening.model_copy(
        update={"reason": redactor.redact(screening.reason),
                "output": redactor.redact(screening.output)}
    )  # fmt: skip
    if screening.passed and (screening.screened or screening.skipped):
        bench.ctx.say(f"  {screening.summary()} in {screening.duration_ms} ms")
    return screening


def _screened_out(bench: Bench, trial: Trial, screening: Screening) -> None:
    """Certain to fail without a run: recorded (its diff is never tried again for this
    fingerprint), shown in the report, not counted against the attempts a harness spends."""
    trial.refusal = f"screened out: {screening.reason}"
    bench.ctx.memory.record_attempt(
        bench.incident_id,
        bench.fingerprint,
        trial.candidate,
        trial.diff,
        "screened_out",
        f"screen: {screening.reason}",
        verification_output=f"$ screen: {screening.check}\n{screening.output}",
        duration_ms=screening.duration_ms,
    )
    bench.ctx.say(f"  screened out in {screening.duration_ms} ms: {screening.reason}")


def event_redactor(event: UniversalFailureEvent) -> Redactor:
    """The named secrets of this run: the verbatim --vars' and this process's environment's
    (a unit may print either, plainly or encoded)."""
    raw_vars = event.dbt.replay_vars() if event.dbt else None
    return Redactor([*(profile_secrets(raw_vars) if raw_vars else []), *environment_secrets()])


def _redacted(event: UniversalFailureEvent, result: Verification) -> Verification:
    """The sandbox ran with the verbatim --vars and the environment's values; nothing stored
    or shown may carry them (`outputs` are patchit's own paths, read by the data check)."""
    redactor = event_redactor(event)
    return result.model_copy(
        update={
            "command": redactor.redact(result.command),
            "output": redactor.redact(result.output),
            "failures": [redactor.redact(unit) for unit in result.failures],
        }
    )


def _data_check(bench: Bench, workspace: Workspace, result: Verification) -> DataCheck:
    ctx = bench.ctx
    with ctx.long_step("  data check: comparing outputs with the baseline"):
        check = check_candidate(
            bench.event,
            bench.evidence,
            bench.repo,
            bench.harness,
            workspace,
            result,
            baseline_commit=bench.last_good,
            work=baseline_work(bench.sandbox),
            ahead=bench.ahead,
        )
    ctx.say(f"  data check: {check.summary}")
    return check


def _judge(trial: Trial) -> tuple[str, str]:
    result = trial.result
    assert result is not None
    if result.passed:
        if trial.data is not None and trial.data.needs_review:
            return "needs_review", f"data check: {trial.data.summary}"
        if trial.candidate.review:
            return "needs_review", f"needs review: {trial.candidate.review}"
        if result.set_aside:
            return "verified", SET_ASIDE + ", ".join(result.set_aside[:5])
        return "verified", ""
    if result.limit_hit:
        why = _LIMITS.get(result.limit_hit, "a sandbox limit stopped it")
        return "harness_limit", f"harness limit hit ({result.limit_hit}): {why}"
    if result.failures:
        return "failed", still_failing(result)
    return "failed", "verification did not pass"


SET_ASIDE = "set aside, failing on this line before this change (not edited by it): "


def _verification_text(trial: Trial) -> str:
    result = trial.result
    assert result is not None
    text = f"$ {result.command}\n{result.output}"
    if trial.data is not None:
        text = f"{text}\n\n{trial.data.markdown()}"
    else:
        why = "the run did not pass" if not result.passed else "no baseline comparison"
        fidelity = f"harness {result.harness} ({result.fidelity}), isolation {result.isolation}"
        text = f"{text}\n\n- fidelity: {fidelity}, data check: not run ({why})"
    if trial.needs_review and trial.candidate.review:  # last: the report shows the tail
        candidate = trial.candidate
        text += f"\n\nNeeds review: {candidate.review}\n{candidate.rationale}\n\n{trial.diff}"
    return text


def _verified_json(trial: Trial) -> str:
    """What landing a verified candidate needs after a crash: candidate, verification, data."""
    return json.dumps(
        {
            "candidate": trial.candidate.model_dump(mode="json"),
            "result": trial.result.model_dump(mode="json") if trial.result else None,
            "data": trial.data.model_dump(mode="json") if trial.data else None,
        }
    )

"""One candidate's trial: a fresh worktree at the failing commit, the pre-check (policy,
memory), the harness, and, where the harness passed, the data-aware check against the
baseline; the attempt is recorded whatever happens. The winner lands on `patchit/<id>`.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from patchit.evidence.redact import profile_secrets, redact
from patchit.fidelity import DataCheck, check_candidate
from patchit.harnesses.base import Harness, Verification, Workspace
from patchit.patching.apply import EditError, apply_edits, preview_edits
from patchit.patching.base import PatchCandidate
from patchit.patching.diffs import unified_diff
from patchit.policy.precheck import precheck
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.sync.branch import commit_patch, create_branch, inspect_commands

if TYPE_CHECKING:
    from patchit.loop import Context, _Run

_LIMITS = {
    "time": "it ran past the harness time limit (loop.harness_timeout_s)",
    "memory": "it ran out of the sandbox's memory limit (sandbox.memory_mb)",
    "network": "it opened a network connection, which the sandbox blocks",
    "write": "it wrote outside the worktree and its scratch dir",
}
CANNOT_VERIFY_NETWORK = (
    "cannot verify: the unit needs the network, which the sandbox blocks; allow it with "
    "`[sandbox] network = true` in .patchit.toml if that is safe, or verify by hand"
)


@dataclass
class Trial:
    """One candidate's way through pre-check, harness and data check."""

    candidate: PatchCandidate
    diff: str
    result: Verification | None = None
    data: DataCheck | None = None

    @property
    def passed(self) -> bool:
        return (
            self.result is not None
            and self.result.passed
            and not (self.data is not None and self.data.needs_review)
        )


@dataclass
class Bench:
    """What every trial of one incident shares."""

    run: _Run
    ctx: Context
    repo: Path
    harness: Harness
    snapshot_dir: Path | None
    sandbox: Path


def out_of_attempts(bench: Bench) -> bool:
    limit = bench.ctx.config.loop.max_attempts
    if bench.ctx.memory.attempt_count(bench.run.fingerprint) >= limit:
        bench.run.stop_reason = f"max attempts ({limit}) for this fingerprint reached"
        return True
    return False


def run_trial(bench: Bench, candidate: PatchCandidate) -> Trial:
    """Pre-check and verify one candidate in its own worktree; record the attempt."""
    run, ctx = bench.run, bench.ctx
    number = len(ctx.memory.attempts_for(run.incident.id)) + 1
    ctx.say(f"candidate {number}: {candidate.strategy} ({candidate.tag}): {candidate.rationale}")
    # one worktree path per incident, made afresh for each candidate: dbt's saved parse
    # (which names files by absolute path) stays valid from one candidate to the next
    workdir = ctx.home / "worktrees" / f"{run.incident.id}-candidate"
    scratch = bench.sandbox / f"candidate-{number}"
    worktree = create_worktree(bench.repo, run.event.commit or "HEAD", workdir)
    try:
        trial = _verify(bench, candidate, worktree, scratch)
    finally:
        remove_worktree(bench.repo, worktree)
        shutil.rmtree(scratch, ignore_errors=True)
    run.trials.append(trial)
    if trial.result is not None and trial.result.limit_hit == "network":
        run.stop_reason = CANNOT_VERIFY_NETWORK
        run.cannot_verify = True
        ctx.say(run.stop_reason)
    return trial


def _verify(bench: Bench, candidate: PatchCandidate, worktree: Path, scratch: Path) -> Trial:
    run, ctx, memory = bench.run, bench.ctx, bench.ctx.memory
    try:
        previews = preview_edits(worktree, candidate.edits)
    except EditError as exc:
        memory.record_attempt(run.incident.id, run.fingerprint, candidate, "", "refused", str(exc))
        ctx.say(f"  refused: {exc}")
        return Trial(candidate, "")
    diff = "".join(unified_diff(p, before, after) for p, (before, after) in previews.items())
    trial = Trial(candidate, diff)
    refusal = precheck(candidate, diff, run.fingerprint, worktree, ctx.config.policy, memory)
    if refusal:
        run.policy_refusals += refusal.startswith("policy")
        memory.record_attempt(run.incident.id, run.fingerprint, candidate, diff, "refused", refusal)
        ctx.say(f"  refused: {refusal}")
        return trial
    apply_edits(worktree, candidate.edits)
    scratch.mkdir(parents=True, exist_ok=True)
    ctx.say(f"  verifying with the {bench.harness.name} harness")
    started = time.monotonic()
    workspace = Workspace(root=worktree, scratch=scratch, snapshot=bench.snapshot_dir)
    trial.result = _redacted(run, bench.harness.verify(workspace, run.event))
    if trial.result.passed:
        trial.data = _data_check(bench, workspace, trial.result)
    duration_ms = int((time.monotonic() - started) * 1000)
    outcome, reason = _judge(trial)
    memory.record_attempt(
        run.incident.id,
        run.fingerprint,
        candidate,
        diff,
        outcome,
        reason,
        verification_output=_verification_text(trial),
        duration_ms=duration_ms,
    )
    ctx.say(f"  {outcome} in {duration_ms / 1000:.1f} s" + (f": {reason}" if reason else ""))
    return trial


def _redacted(run: _Run, result: Verification) -> Verification:
    """The sandbox ran with the verbatim --vars; nothing stored or shown may carry them."""
    raw_vars = run.event.dbt.replay_vars() if run.event.dbt else None
    secrets = profile_secrets(raw_vars) if raw_vars else []
    return result.model_copy(
        update={
            "command": redact(result.command, secrets),
            "output": redact(result.output, secrets),
        }
    )


def _data_check(bench: Bench, workspace: Workspace, result: Verification) -> DataCheck:
    run, ctx = bench.run, bench.ctx
    assert run.evidence is not None
    ctx.say("  data check: comparing outputs with the baseline")
    check = check_candidate(
        run.event,
        run.evidence,
        bench.repo,
        bench.harness,
        workspace,
        result,
        baseline_commit=run.last_good,
        work=bench.sandbox / "baseline",
    )
    ctx.say(f"  data check: {check.summary}")
    return check


def _judge(trial: Trial) -> tuple[str, str]:
    result = trial.result
    assert result is not None
    if result.passed:
        if trial.data is not None and trial.data.needs_review:
            return "needs_review", f"data check: {trial.data.summary}"
        return "verified", ""
    if result.limit_hit:
        why = _LIMITS.get(result.limit_hit, "a sandbox limit stopped it")
        return "harness_limit", f"harness limit hit ({result.limit_hit}): {why}"
    if result.failures:
        return "failed", "still failing: " + ", ".join(result.failures[:5])
    return "failed", "verification did not pass"


def _verification_text(trial: Trial) -> str:
    result = trial.result
    assert result is not None
    text = f"$ {result.command}\n{result.output}"
    if trial.data is not None:
        return f"{text}\n\n{trial.data.markdown()}"
    why = "the run did not pass" if not result.passed else "no baseline comparison"
    fidelity = f"harness {result.harness} ({result.fidelity}), isolation {result.isolation}"
    return f"{text}\n\n- fidelity: {fidelity}, data check: not run ({why})"


def land(bench: Bench, trial: Trial) -> None:
    """Commit the winner on `patchit/<id>` from a fresh worktree (nothing left holding it)."""
    run, ctx = bench.run, bench.ctx
    workdir = ctx.home / "worktrees" / f"{run.incident.id}-land"
    worktree = create_worktree(bench.repo, run.event.commit or "HEAD", workdir)
    try:
        files = apply_edits(worktree, trial.candidate.edits)
        sha = commit_patch(worktree, files, _commit_message(run, trial))
    finally:
        remove_worktree(bench.repo, worktree)
    run.branch = create_branch(bench.repo, run.incident.id, sha)
    assert trial.result is not None
    run.winner = (trial.candidate, trial.diff, trial.result)
    run.winner_data = trial.data
    run.commands = inspect_commands(bench.repo, run.branch, run.event)


def _commit_message(run: _Run, trial: Trial) -> str:
    candidate = trial.candidate
    data = f"Data check: {trial.data.summary}\n" if trial.data is not None else ""
    return (
        f"patchit: {candidate.rationale}\n\n"
        f"Incident: {run.incident.id}\n"
        f"Failing unit: {run.event.unit_id}\n"
        f"Strategy: {candidate.strategy} ({candidate.tag}, tier {candidate.tier})\n"
        f"Verified by re-running the unit and its downstream in a sandbox.\n{data}"
    )

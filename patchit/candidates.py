"""Trying candidates: tier 0's fix-its, then the model's rounds; verify each, land the winner.

Each candidate is applied in a fresh worktree at the failing commit, pre-checked (policy,
memory), verified by the harness and, where the harness passed, checked against the baseline's
outputs (data-aware verification). Tier 0 stops at its first verified candidate. A model round
verifies all of its candidates, one after another, and the smallest passing diff wins.
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
from patchit.harnesses.registry import select_harness
from patchit.patching.apply import EditError, apply_edits, preview_edits
from patchit.patching.base import PatchCandidate
from patchit.patching.diffs import normalise_diff, unified_diff
from patchit.patching.llm import BudgetExhausted, LlmStrategy, LlmUnavailable, llm_enabled
from patchit.patching.registry import propose_patches
from patchit.policy.precheck import precheck
from patchit.sandbox.worktree import create_worktree, remove_worktree
from patchit.sync.branch import commit_patch, create_branch, inspect_commands

if TYPE_CHECKING:
    from patchit.loop import Context, _Run

TIER0 = "tier 0 (deterministic fix-its)"
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
class _Bench:
    """What every trial of one incident shares."""

    run: _Run
    ctx: Context
    repo: Path
    harness: Harness
    snapshot_dir: Path | None
    sandbox: Path


def try_candidates(
    run: _Run, repo: Path, snapshot_dir: Path | None, sandbox: Path, ctx: Context
) -> None:
    """Tier 0, then (when enabled) the model; sets run.winner or run.stop_reason."""
    assert run.evidence is not None
    bench = _Bench(
        run, ctx, repo, select_harness(run.event, repo, ctx.harnesses), snapshot_dir, sandbox
    )
    run.tiers.append(TIER0)
    proposed = 0
    history = ctx.memory.history(run.fingerprint)
    for candidate in propose_patches(run.evidence, history, ctx.strategies):
        proposed += 1
        if _out_of_attempts(bench):
            return
        trial = _trial(bench, candidate)
        if trial.passed:
            _land(bench, trial)
            return
        if run.stop_reason:  # cannot verify at all: no other candidate would fare better
            return
    proposed += _llm_rounds(bench)
    if run.winner is not None or run.stop_reason:
        return
    if proposed == 0:
        run.stop_reason = "no strategy proposed a patch for this failure"
        if run.llm_problems:
            run.stop_reason += " (the model's answers: " + "; ".join(run.llm_problems) + ")"
    elif any(t.data is not None and t.data.needs_review for t in run.trials):
        run.stop_reason = (
            "a candidate made the run pass but changed output values the breaking change did "
            "not touch: it needs review and was not put on a branch"
        )
    else:
        run.stop_reason = f"none of the {proposed} candidate(s) passed pre-check and verification"


def _out_of_attempts(bench: _Bench) -> bool:
    limit = bench.ctx.config.loop.max_attempts
    if bench.ctx.memory.attempt_count(bench.run.fingerprint) >= limit:
        bench.run.stop_reason = f"max attempts ({limit}) for this fingerprint reached"
        return True
    return False


def _llm_rounds(bench: _Bench) -> int:
    """The model's rounds; returns how many candidates it proposed."""
    run, ctx = bench.run, bench.ctx
    cfg = ctx.config.llm
    if not llm_enabled(cfg):
        run.tiers.append("tier 1 (LLM): off (no ANTHROPIC_API_KEY)")
        return 0
    run.tiers.append(f"tier 1 (LLM, {cfg.model})")
    assert run.evidence is not None
    strategy = LlmStrategy(cfg, ctx.memory, run.incident.id)
    try:
        return _rounds(bench, strategy)
    finally:
        strategy.close()


def _rounds(bench: _Bench, strategy: LlmStrategy) -> int:
    run, ctx = bench.run, bench.ctx
    cfg = ctx.config.llm
    assert run.evidence is not None
    proposed = 0
    for round_no in range(1, cfg.max_rounds + 1):
        if _out_of_attempts(bench):
            break
        ctx.say(
            f"LLM round {round_no}: asking {cfg.model} for up to "
            f"{cfg.candidates_per_round} candidate(s)"
        )
        try:
            answer = strategy.propose_round(
                run.evidence, ctx.memory.history(run.fingerprint), round_no
            )
        except (BudgetExhausted, LlmUnavailable) as exc:
            run.stop_reason = f"LLM tier stopped: {exc}"
            ctx.say(run.stop_reason)
            break
        run.llm_rounds = round_no
        for candidate, reason in answer.rejected:
            ctx.memory.record_attempt(
                run.incident.id, run.fingerprint, candidate, "", "refused", reason
            )
            ctx.say(f"  refused: {reason}")
        for note in answer.notes:
            ctx.say(f"  {note}")
        if answer.problem:
            run.llm_problems.append(f"round {round_no}: {answer.problem}")
            ctx.say(f"  no usable candidate: {answer.problem}")
        proposed += len(answer.candidates)
        passing = []
        for candidate in answer.candidates:
            if _out_of_attempts(bench):
                break
            trial = _trial(bench, candidate)
            if trial.passed:
                passing.append(trial)
            if run.stop_reason:
                break
        if passing:
            _land(bench, min(passing, key=lambda t: _diff_size(t.diff)))
            break
        if run.stop_reason:
            break
    return proposed


def _diff_size(diff: str) -> tuple[int, int]:
    """Changed lines, then characters, of the normalised diff: the smallest fix wins."""
    normal = normalise_diff(diff)
    return (normal.count("\n"), len(normal))


def _trial(bench: _Bench, candidate: PatchCandidate) -> Trial:
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


def _verify(bench: _Bench, candidate: PatchCandidate, worktree: Path, scratch: Path) -> Trial:
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


def _data_check(bench: _Bench, workspace: Workspace, result: Verification) -> DataCheck:
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


def _land(bench: _Bench, trial: Trial) -> None:
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

"""Trying candidates: tier 0's fix-its, then the model's rounds; verify each, land the winner.

Each candidate goes through `patchit.trial` (worktree, pre-check, harness, data check). Tier 0
stops at its first verified candidate. A model round verifies all of its candidates, one after
another, and the smallest passing diff wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from patchit.harnesses.registry import select_harness
from patchit.patching.diffs import normalise_diff
from patchit.patching.llm import BudgetExhausted, LlmStrategy, LlmUnavailable, llm_enabled
from patchit.patching.registry import propose_patches
from patchit.trial import Bench, land, out_of_attempts, run_trial

if TYPE_CHECKING:
    from patchit.loop import Context, _Run

TIER0 = "tier 0 (deterministic fix-its)"


def try_candidates(
    run: _Run, repo: Path, snapshot_dir: Path | None, sandbox: Path, ctx: Context
) -> None:
    """Tier 0, then (when enabled) the model; sets run.winner or run.stop_reason."""
    assert run.evidence is not None
    bench = Bench(
        run, ctx, repo, select_harness(run.event, repo, ctx.harnesses), snapshot_dir, sandbox
    )
    run.tiers.append(TIER0)
    proposed = 0
    history = ctx.memory.history(run.fingerprint)
    for candidate in propose_patches(run.evidence, history, ctx.strategies):
        proposed += 1
        if out_of_attempts(bench):
            return
        trial = run_trial(bench, candidate)
        if trial.passed:
            land(bench, trial)
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


def _llm_rounds(bench: Bench) -> int:
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


def _rounds(bench: Bench, strategy: LlmStrategy) -> int:
    run, ctx = bench.run, bench.ctx
    cfg = ctx.config.llm
    assert run.evidence is not None
    proposed = 0
    for round_no in range(1, cfg.max_rounds + 1):
        if out_of_attempts(bench):
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
            if out_of_attempts(bench):
                break
            trial = run_trial(bench, candidate)
            if trial.passed:
                passing.append(trial)
            if run.stop_reason:
                break
        if passing:
            land(bench, min(passing, key=lambda t: _diff_size(t.diff)))
            break
        if run.stop_reason:
            break
    return proposed


def _diff_size(diff: str) -> tuple[int, int]:
    """Changed lines, then characters, of the normalised diff: the smallest fix wins."""
    normal = normalise_diff(diff)
    return (normal.count("\n"), len(normal))

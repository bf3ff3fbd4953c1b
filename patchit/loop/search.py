"""Searching for a fix: propose, pre-check, verify.

Each strategy is asked in turn (tier 0's fix-its first, then the model), round after round
while it wants another round, and each fresh candidate goes through its trial
(`patchit.loop.trial`). A strategy whose candidates are ranked stops at the first one that
verifies; one whose round is a set of alternatives (the model) has every candidate of the
round verified, and the smallest passing diff wins. The search returns what happened; it
writes no state of the loop's.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field

from patchit.evidence.intents import change_intents
from patchit.loop.combine import joined_candidates
from patchit.loop.landing import recorded_winner
from patchit.loop.trial import (
    Bench,
    Trial,
    out_of_attempts,
    record_refusal,
    run_trial,
)
from patchit.memory.ledger import Ledger
from patchit.memory.records import AttemptOutcome
from patchit.patching.base import PatchCandidate, Proposal, ProposalRequest, Strategy
from patchit.patching.diffs import normalise_diff

TIER0 = "tier 0 (deterministic fix-its)"
NEEDS_REVIEW = (
    "a candidate made the run pass but changed output values the breaking change did not "
    "touch: it needs review and was not put on a branch"
)
CANDIDATE_NEEDS_REVIEW = (
    "a candidate made the run pass but {review}: it needs review and was not put on a branch"
)


@dataclass(frozen=True)
class Search:
    """What the search found: the winner, if any, every trial, and why it stopped."""

    winner: Trial | None
    trials: list[Trial]
    stop: str = ""
    tiers: list[str] = field(default_factory=list)
    proposed: int = 0

    @property
    def needs_review(self) -> bool:
        """A candidate passed but the data check, or its own review reason, kept it off the
        branch."""
        return self.winner is None and any(t.needs_review for t in self.trials)

    @property
    def cannot_verify(self) -> bool:
        return any(t.stop for t in self.trials)

    @property
    def policy_refusals(self) -> int:
        return sum(t.refusal.startswith("policy") for t in self.trials)


@dataclass(frozen=True)
class _Tried:
    """One strategy's rounds."""

    winner: Trial | None = None
    stop: str = ""
    proposed: int = 0
    status: str = ""
    problems: tuple[str, ...] = ()


def recorded_search(bench: Bench) -> Search | None:
    """The search an earlier, killed run of this incident already won: its verified fix, to
    land without asking the strategies again (None when there is none)."""
    trial = recorded_winner(bench)
    if trial is None:
        return None
    bench.ctx.say(
        f"an earlier run verified a fix for this incident and was stopped before it landed: "
        f"landing it ({trial.candidate.strategy}, {trial.candidate.tag}) without verifying again"
    )
    return Search(trial, [trial], tiers=[TIER0])


def search_fix(bench: Bench, strategies: list[Strategy]) -> Search:
    """Ask every strategy, in order, until a candidate verifies or a stop is reached."""
    trials: list[Trial] = []
    tiers = [TIER0]
    problems: list[str] = []
    errors: list[str] = []  # strategies that raised, each recorded as an `error` attempt
    proposed = 0
    seen: set[str] = set()  # tier 0's edit sets: two fix-its proposing one fix try it once
    for strategy in _with_joined(strategies):
        if strategy is None:  # tier 0 is done: two failed candidates that each did half
            tried = _try_joined(bench, trials)
        else:
            tried = _try_strategy(bench, strategy, seen, trials, errors)
        proposed += tried.proposed
        problems += tried.problems
        if tried.status and tried.status not in tiers:
            tiers.append(tried.status)
        if tried.winner is not None or tried.stop:
            return Search(tried.winner, trials, tried.stop, tiers, proposed)
    return Search(None, trials, _why_none(proposed, problems, trials, errors), tiers, proposed)


def _with_joined(strategies: list[Strategy]) -> Iterator[Strategy | None]:
    """The strategies in order, with None where tier 0 ends (the joined candidates' turn)."""
    joined = False
    for strategy in strategies:
        if strategy.tier > 0 and not joined:
            joined = True
            yield None
        yield strategy
    if not joined:
        yield None


def _try_joined(bench: Bench, trials: list[Trial]) -> _Tried:
    """Two failed candidates that each did half, verified together (`patchit.loop.combine`)."""
    candidates = joined_candidates(trials, change_intents(bench.evidence))
    if not candidates:
        return _Tried()
    winner, stop = _verify_round(bench, candidates, "first", trials)
    return _Tried(winner, stop, len(candidates))


def _try_strategy(
    bench: Bench, strategy: Strategy, seen: set[str], trials: list[Trial], errors: list[str]
) -> _Tried:
    proposed, status = 0, ""
    problems: list[str] = []
    round_no = 0
    while True:
        round_no += 1
        if strategy.tier > 0 and (stop := out_of_attempts(bench)):
            return _Tried(stop=stop, proposed=proposed, status=status, problems=tuple(problems))
        proposal = _ask(bench, strategy, round_no, errors)
        status = proposal.status or status
        _report_round(bench, proposal, problems)
        if proposal.stop:
            bench.ctx.say(proposal.stop)
            return _Tried(stop=proposal.stop, proposed=proposed, status=status,
                          problems=tuple(problems))  # fmt: skip
        fresh = _fresh(proposal.candidates, seen if strategy.tier == 0 else None)
        proposed += len(fresh)
        winner, stop = _verify_round(bench, fresh, proposal.pick, trials)
        if winner is not None or stop or not proposal.more:
            return _Tried(winner, stop, proposed, status, tuple(problems))


def _ask(bench: Bench, strategy: Strategy, round_no: int, errors: list[str]) -> Proposal:
    """The strategy's proposal; one that raises is a failed attempt of its own (outcome
    `error`, the exception in the report's timeline) and the search goes on without it."""
    request = ProposalRequest(
        evidence=bench.evidence,
        history=bench.ctx.memory.history(bench.fingerprint),
        round=round_no,
        incident_id=bench.incident_id,
        config=bench.ctx.config,
        ledger=Ledger(bench.ctx.memory),
    )
    try:
        return strategy.propose(request)
    except Exception as exc:  # one faulty strategy must not hide the others' candidates
        errors.append(_record_error(bench, strategy, round_no, exc))
        return Proposal()


def _record_error(bench: Bench, strategy: Strategy, round_no: int, exc: Exception) -> str:
    """Record a strategy's exception as an attempt with no edits; the line the report shows."""
    why = f"the strategy raised {type(exc).__name__}: {exc}"
    stub = PatchCandidate(strategy=strategy.name, tag=strategy.tag, tier=strategy.tier,
                          edits=[], rationale=f"round {round_no}: {why}")  # fmt: skip
    trace = "".join(traceback.format_exception(exc))
    bench.ctx.memory.record_attempt(
        bench.incident_id, bench.fingerprint, stub, "", AttemptOutcome.ERROR, why,
        verification_output=f"$ {strategy.name}.propose (round {round_no})\n{trace[-4000:]}",
    )  # fmt: skip
    bench.ctx.say(f"  strategy {strategy.name}: {why} (recorded; going on)")
    return f"{strategy.name} raised {type(exc).__name__}: {exc}"


def _report_round(bench: Bench, proposal: Proposal, problems: list[str]) -> None:
    for note in proposal.notes:
        bench.ctx.say(note if note.startswith("LLM round") else f"  {note}")
    for candidate, reason in proposal.rejected:
        record_refusal(bench, candidate, "", reason)
    if proposal.problem:
        problems.append(proposal.problem)
        bench.ctx.say(f"  no usable candidate: {proposal.problem}")


def _fresh(candidates: list[PatchCandidate], seen: set[str] | None) -> list[PatchCandidate]:
    if seen is None:
        return list(candidates)
    fresh = []
    for candidate in candidates:
        key = "\x00".join(e.model_dump_json() for e in candidate.edits)
        if key not in seen:
            seen.add(key)
            fresh.append(candidate)
    return fresh


def _verify_round(
    bench: Bench, candidates: list[PatchCandidate], pick: str, trials: list[Trial]
) -> tuple[Trial | None, str]:
    """Verify a round's candidates: (the winner, or None; a stop reason, or "")."""
    passing: list[Trial] = []
    stop = ""
    for candidate in candidates:
        if stop := out_of_attempts(bench):
            break
        trial = run_trial(bench, candidate)
        trials.append(trial)
        if trial.passed:
            if pick == "first":
                return trial, ""
            passing.append(trial)
        if stop := trial.stop:
            break
    if passing:
        return min(passing, key=lambda t: _diff_size(t.diff)), ""
    return None, stop


def _why_none(proposed: int, problems: list[str], trials: list[Trial], errors: list[str]) -> str:
    if proposed == 0:
        why = "no strategy proposed a patch for this failure"
        why += f" (the model's answers: {'; '.join(problems)})" if problems else ""
        return why + (f"; {', '.join(errors)}" if errors else "")
    if any(t.data is not None and t.data.needs_review for t in trials):
        return NEEDS_REVIEW
    if reviewed := [t for t in trials if t.needs_review]:
        return CANDIDATE_NEEDS_REVIEW.format(review=reviewed[0].candidate.review)
    return f"none of the {proposed} candidate(s) passed pre-check, screen and verification"


def _diff_size(diff: str) -> tuple[int, int]:
    """Changed lines, then characters, of the normalised diff: the smallest fix wins."""
    normal = normalise_diff(diff)
    return (normal.count("\n"), len(normal))

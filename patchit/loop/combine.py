"""Two failed candidates that each did half: tried together.

Breaking commits stack when the first is not merged back: a column removed in one commit, a
model renamed in the next, one run failing on both. A forward candidate for the rename then
fails on the removed column ("payment_method is what the change meant"), and the revert of the
removal fails on the rename: neither passes alone, both together would. After the deterministic
tier, a failed candidate whose unit still fails on a name the change removed or renamed is
joined with a failed candidate that undoes that very intent, where the two edit different
files. The joint candidate goes through its own trial like any other: it undoes an intent, so
it carries "reverts your change: <intent>" and ends `needs_review` (unless `[policy] revert =
"allow"`), now with the forward half proven beside it, instead of `failed`.
"""

from __future__ import annotations

from patchit.evidence.intents import Intent
from patchit.loop.still_failing import meant_intent
from patchit.loop.trial import Trial
from patchit.memory.records import JOINED, REVERTS
from patchit.patching.base import PatchCandidate

MAX_JOINED = 2
STRATEGY = JOINED


def joined_candidates(trials: list[Trial], intents: list[Intent]) -> list[PatchCandidate]:
    """Forward candidate + the revert of what it still fails on, for each failed forward
    candidate whose remaining error names an intent a failed revert undoes (at most
    `MAX_JOINED`, the earliest forward candidates first)."""
    failed = [t for t in trials if t.result is not None and not t.result.passed and not t.stop]
    joined: list[PatchCandidate] = []
    for forward in failed:
        if forward.reverts or forward.candidate.strategy == STRATEGY:
            continue
        assert forward.result is not None  # narrowed by `failed`
        intent = meant_intent(forward.result, intents)
        back = next((b for b in failed if intent is not None
                     and intent.description in b.reverts and b.candidate.strategy != STRATEGY
                     and not _paths(forward) & _paths(b)), None)  # fmt: skip
        if intent is not None and back is not None:
            joined.append(_joined(forward, back, intent))
        if len(joined) >= MAX_JOINED:
            break
    return joined


def _paths(trial: Trial) -> set[str]:
    return {edit.path for edit in trial.candidate.edits}


def _joined(forward: Trial, back: Trial, intent: Intent) -> PatchCandidate:
    one, two = forward.candidate, back.candidate
    unit = forward.result.failures[0] if forward.result else "a unit"
    reviews = [part for c in (one, two) for part in c.review.split("; ")
               if part and not part.startswith(REVERTS)]  # fmt: skip
    return PatchCandidate(
        strategy=STRATEGY,
        tag=f"{one.tag}+{two.tag}",
        tier=max(one.tier, two.tier),
        edits=[*one.edits, *two.edits],
        rationale=(
            f"{one.strategy} ({one.tag}) left {unit} failing on {intent.old}, which the change "
            f"meant: {intent.description}; "
            f"{two.strategy} ({two.tag}) undoes that: the two together"
        ),
        confidence=min(one.confidence, two.confidence),
        review="; ".join(reviews),
        follows={**one.follows, **two.follows},
    )

"""A revert of an intent is never `fixed`: every candidate held against the change's intents.

The one place every candidate passes whatever proposed it (a tier-0 fix-it, the partial
revert, the model): once its edits are previewed, and before it is verified. A candidate
whose edits undo what the breaking change meant (restore a renamed column's old name, drop an
added column or join, put a changed literal back, re-create a deleted file; see
`patchit.evidence.intents`) carries the review "reverts your change: <intent>": it is still
verified, so the report can say it would pass, but it ends `needs_review` and never lands.
Undoing a slip (a dropped comma, a stray character) is not undoing an intent.
`[policy] revert = "allow"` lets such a candidate land.

Once one candidate with a revert has passed and is held, another that undoes an intent of the same
intents could only be held too: it is refused before its verification (`held_again`), so
the search spends its runs on forward candidates only.
"""

from __future__ import annotations

from collections.abc import Callable

from patchit.config import PolicyConfig
from patchit.evidence.intents import Intent, change_intents, revert_label, reverted_intents
from patchit.evidence.model import Evidence
from patchit.memory.records import REVERTS
from patchit.patching.base import PatchCandidate


def intent_review(
    candidate: PatchCandidate,
    previews: dict[str, tuple[str, str]],
    evidence: Evidence,
    policy: PolicyConfig,
    say: Callable[[str], None] = lambda _line: None,
    undone: list[Intent] | None = None,
) -> PatchCandidate:
    """The candidate, with "reverts your change: <intent>" leading its review when its
    edited texts (`previews`: path -> (before, after)) undo an intent of the change
    (`undone`: those intents, when the caller has read them already)."""
    if policy.revert == "allow":
        return candidate
    if undone is None:
        undone = reverted_intents(change_intents(evidence), previews)
    if not undone:
        return candidate
    label = revert_label(undone)
    say(f"  {label}")
    review = f"{label}; {candidate.review}" if candidate.review else label
    return candidate.model_copy(update={"review": review})


def held_again(intent: str, held: str) -> str:
    """Why a candidate that undoes what a held one undoes is not verified."""
    return (
        f"not verified: it {REVERTS}: {intent}, as {held} does, which passed and is held "
        "for review; it could only be held too"
    )

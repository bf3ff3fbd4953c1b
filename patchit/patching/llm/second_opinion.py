"""The classification second opinion: the model classifies what the rules called `unknown`.

A class a signature matched is final: it is returned unchanged and no call is made, so the
model can never turn a recognised infra, data or env failure into a `code_bug` to patch.
The model must quote the evidence; quotes that do not occur in what it was shown are dropped,
and a class left without a quote is not used. The verdict's reason carries the quotes, so the
report shows what the class rests on.
"""

from __future__ import annotations

import re

from patchit.classify.model import FailureClass, Verdict
from patchit.config import LlmConfig
from patchit.evidence.model import Evidence
from patchit.memory.ledger import Ledger, LlmPurpose
from patchit.memory.store import Memory
from patchit.patching.llm.answers import ClassifyAnswer, classify_tool
from patchit.patching.llm.client import LlmRequest
from patchit.patching.llm.prompt import classify_prompt
from patchit.patching.llm.session import LlmMalformed, LlmSession

SIGNATURE = "llm_second_opinion"
CLASSIFY_MAX_TOKENS = 1024
MAX_QUOTES = 3
QUOTE_CHARS = 200
_MIN_QUOTE_CHARS = 4


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def verified_quotes(quotes: list[str], shown: str) -> list[str]:
    """The quotes that occur in `shown` (whitespace runs compared as one space)."""
    haystack = _squash(shown)
    kept: list[str] = []
    for quote in quotes:
        needle = _squash(quote.strip().strip("\"'`"))
        if len(needle) >= _MIN_QUOTE_CHARS and needle in haystack and needle not in kept:
            kept.append(needle)
    return kept


def _with_note(verdict: Verdict, note: str) -> Verdict:
    return verdict.model_copy(update={"reason": f"{verdict.reason.rstrip()} ({note})"})


def second_opinion(
    evidence: Evidence,
    verdict: Verdict,
    config: LlmConfig,
    memory: Memory | Ledger,
    incident_id: str,
    *,
    api_key: str | None = None,
    session: LlmSession | None = None,
) -> Verdict:
    """`verdict` unchanged unless it is `unknown`; then the model's class, quoting evidence.

    Raises BudgetExhausted (nothing sent) and LlmUnavailable like a proposal round; an answer
    that is malformed or quotes nothing real leaves the verdict `unknown` with a note.
    """
    if verdict.cls is not FailureClass.UNKNOWN or not config.second_opinion:
        return verdict
    if session is None:
        ledger = memory if isinstance(memory, Ledger) else Ledger(memory)
        session = LlmSession(config, ledger, incident_id, api_key=api_key)
    prompt = classify_prompt(evidence, config)
    request = LlmRequest(
        prompt.system, prompt.user, classify_tool(), min(config.max_tokens, CLASSIFY_MAX_TOKENS)
    )
    try:
        answer = session.call(LlmPurpose.CLASSIFY, 0, request, ClassifyAnswer.model_validate)
    except LlmMalformed as exc:
        return _with_note(verdict, f"the LLM second opinion was unusable: {exc}")
    found = answer.value
    quotes = verified_quotes(found.evidence_quotes, prompt.user)[:MAX_QUOTES]
    if not quotes:
        return _with_note(
            verdict,
            f"the LLM second opinion said {found.cls.value} but quoted nothing found in the "
            "evidence, so it is not used",
        )
    shown = "; ".join(
        f'"{q if len(q) <= QUOTE_CHARS else q[: QUOTE_CHARS - 3] + "..."}"' for q in quotes
    )
    return Verdict(
        cls=found.cls,
        signature=SIGNATURE,
        reason=f"LLM second opinion ({config.model}): {found.reason.strip()} "
        f"Evidence quoted: {shown}.",
        next_actions=verdict.next_actions,
    )

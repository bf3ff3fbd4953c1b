"""`LlmStrategy`: tier 1, Claude proposing search/replace patches where the rules have none.

One round is one metered call asking for up to `candidates_per_round` candidates. The loop
drives the rounds (`propose_round`), verifies the candidates one after another, records the
rejected ones as refused attempts, and feeds every failure back through `history` into the
next round's prompt. `propose` (the plain `Strategy` protocol) is round 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from patchit.classify.model import Verdict
from patchit.config import LlmConfig
from patchit.evidence.model import Evidence
from patchit.memory.ledger import Ledger, LlmPurpose
from patchit.memory.store import Memory
from patchit.patching.base import Edit, PatchCandidate, PriorAttempt
from patchit.patching.llm.answers import CandidateAnswer, ProposalAnswer, propose_tool
from patchit.patching.llm.client import LlmRequest, Usage
from patchit.patching.llm.edits import EditRejected, resolve_edits
from patchit.patching.llm.prompt import propose_prompt
from patchit.patching.llm.second_opinion import second_opinion
from patchit.patching.llm.session import LlmMalformed, LlmSession


class LlmRound(BaseModel):
    """What one round produced: candidates to verify, rejections, the call's usage."""

    model_config = ConfigDict(extra="forbid")

    round: int
    candidates: list[PatchCandidate] = Field(default_factory=list)
    rejected: list[tuple[PatchCandidate, str]] = Field(
        default_factory=list,
        description="(candidate, reason) whose edits cannot apply: record them as refused",
    )
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    problem: str = Field(default="", description="why the round yielded nothing usable, if so")
    notes: list[str] = Field(default_factory=list, description="e.g. whitespace-tolerant matches")
    dropped_context: list[str] = Field(
        default_factory=list, description="evidence left out or cut to fit the context budget"
    )

    @property
    def note(self) -> str:
        """One line for the loop to show: what went wrong or was left out, "" when nothing."""
        parts = [self.problem, *self.notes]
        if self.dropped_context:
            parts.append("left out of the prompt: " + "; ".join(self.dropped_context))
        return "; ".join(p for p in parts if p)


class LlmStrategy:
    """The LLM tier. Built by the loop (not an entry point): it needs the incident's budget."""

    name: ClassVar[str] = "llm"
    tag: ClassVar[str] = "llm"
    tier: ClassVar[int] = 1

    def __init__(
        self,
        config: LlmConfig,
        memory: Memory | Ledger,
        incident_id: str,
        *,
        api_key: str | None = None,
        session: LlmSession | None = None,
    ) -> None:
        self.config = config
        ledger = memory if isinstance(memory, Ledger) else Ledger(memory)
        self.session = session or LlmSession(config, ledger, incident_id, api_key=api_key)

    def propose(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        """Round 1 as the plain `Strategy` protocol: the candidates that apply."""
        return self.propose_round(evidence, history, 1).candidates

    def propose_round(
        self, evidence: Evidence, history: list[PriorAttempt], round_no: int
    ) -> LlmRound:
        """Ask for up to `candidates_per_round` candidates in one call.

        Raises BudgetExhausted (before any call) and LlmUnavailable; a malformed answer is a
        round with no candidates and `problem` set.
        """
        prompt = propose_prompt(evidence, history, self.config)
        wanted = self.config.candidates_per_round
        request = LlmRequest(
            prompt.system, prompt.user, propose_tool(wanted), self.config.max_tokens
        )
        dropped = [f"cut short: {n}" for n in prompt.packed.cut]
        dropped += [f"dropped: {n}" for n in prompt.packed.dropped]
        result = LlmRound(round=round_no, dropped_context=dropped)
        try:
            metered = self.session.call(
                LlmPurpose.PROPOSE, round_no, request, ProposalAnswer.model_validate
            )
        except LlmMalformed as exc:
            self._set_usage(result, exc.usage)
            result.problem = str(exc)
            return result
        self._set_usage(result, metered.usage)
        answers = metered.value.candidates
        if not answers:
            result.problem = "the model proposed no patch"
        if len(answers) > wanted:
            result.notes.append(
                f"the model gave {len(answers)} candidates; kept the first {wanted}"
            )
        root = Path(evidence.repo_root)
        for number, answer in enumerate(answers[:wanted]):
            usage = metered.usage if number == 0 else Usage()
            self._add(result, root, answer, usage)
        return result

    def second_opinion(self, evidence: Evidence, verdict: Verdict) -> Verdict:
        """The classification second opinion through this strategy's session."""
        session = self.session
        return second_opinion(
            evidence, verdict, self.config, session.ledger, session.incident_id, session=session
        )

    def close(self) -> None:
        self.session.close()

    @staticmethod
    def _set_usage(result: LlmRound, usage: Usage) -> None:
        result.tokens_in, result.tokens_out, result.cost_usd = (
            usage.tokens_in,
            usage.tokens_out,
            usage.cost_usd,
        )

    def _add(self, result: LlmRound, root: Path, answer: CandidateAnswer, usage: Usage) -> None:
        proposed = PatchCandidate(
            strategy=self.name,
            tag=answer.strategy_tag,
            tier=self.tier,
            edits=[Edit(path=e.file, search=e.search, replace=e.replace) for e in answer.edits],
            rationale=answer.rationale.strip() or "(the model gave no rationale)",
            confidence=answer.confidence,
            tokens_in=usage.tokens_in,
            tokens_out=usage.tokens_out,
            cost_usd=usage.cost_usd,
        )
        try:
            edits = resolve_edits(root, answer.edits, result.notes)
        except EditRejected as exc:
            result.rejected.append((proposed, str(exc)))
            return
        result.candidates.append(proposed.model_copy(update={"edits": edits}))

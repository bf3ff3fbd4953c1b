"""`LlmStrategy`: tier 1, Claude proposing search/replace patches where the rules have none.

One round is one metered call asking for up to `candidates_per_round` candidates. The loop
asks round after round through the plain `Strategy` protocol (`propose(request)`), verifies
the candidates one after another, records the rejected ones as refused attempts, and feeds
every failure back through the request's `history` into the next round's prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from patchit.classify.model import Verdict
from patchit.config import LlmConfig
from patchit.errors import PatchitError
from patchit.evidence.model import Evidence
from patchit.memory.ledger import Ledger, LlmPurpose
from patchit.memory.store import Memory
from patchit.patching.base import Edit, PatchCandidate, PriorAttempt, Proposal, ProposalRequest
from patchit.patching.llm.answers import CandidateAnswer, ProposalAnswer, propose_tool
from patchit.patching.llm.budget import BudgetExhausted
from patchit.patching.llm.client import LlmRequest, LlmUnavailable, Usage, llm_enabled
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
    """The LLM tier, an entry point like the fix-its. Each request carries what it needs (the
    incident, the config, the ledger that meters the budget); one session per incident.

    Built with `config`, `memory` and `incident_id` (or a `session`), it is bound to that
    incident and config whatever the request says: tests and the demo drive it so.
    """

    name: ClassVar[str] = "llm"
    tag: ClassVar[str] = "llm"
    tier: ClassVar[int] = 1
    rank: ClassVar[int] = 0

    def __init__(
        self,
        config: LlmConfig | None = None,
        memory: Memory | Ledger | None = None,
        incident_id: str | None = None,
        *,
        api_key: str | None = None,
        session: LlmSession | None = None,
    ) -> None:
        self._api_key = api_key
        self._sessions: dict[str, LlmSession] = {}
        self.session: LlmSession | None = session
        if session is None and config is not None and memory is not None and incident_id:
            ledger = memory if isinstance(memory, Ledger) else Ledger(memory)
            self.session = LlmSession(config, ledger, incident_id, api_key=api_key)
        self.config = self.session.config if self.session is not None else config

    def propose(self, request: ProposalRequest) -> Proposal:
        """One round: up to `candidates_per_round` candidates from one metered call; asks to
        be called again (with the failures in the history) until `max_rounds`."""
        session = self.session or self._session_for(request)
        if session is None:
            return Proposal(status="tier 1 (LLM): off (no ANTHROPIC_API_KEY)")
        cfg = session.config
        status = f"tier 1 (LLM, {cfg.model})"
        if request.round > cfg.max_rounds:
            return Proposal(status=status)
        try:
            answer = self.propose_round(
                request.evidence, request.history, request.round, session=session
            )
        except (BudgetExhausted, LlmUnavailable) as exc:
            return Proposal(stop=f"LLM tier stopped: {exc}", status=status)
        notes = [
            f"LLM round {request.round}: asked {cfg.model} for up to "
            f"{cfg.candidates_per_round} candidate(s)",
            *answer.notes,
        ]
        return Proposal(
            candidates=answer.candidates,
            rejected=answer.rejected,
            notes=notes,
            problem=f"round {request.round}: {answer.problem}" if answer.problem else "",
            more=request.round < cfg.max_rounds,
            pick="smallest",
            status=status,
        )

    def _session_for(self, request: ProposalRequest) -> LlmSession | None:
        cfg = request.config.llm
        if not llm_enabled(cfg) or request.ledger is None or not request.incident_id:
            return None
        session = self._sessions.get(request.incident_id)
        if session is None:
            self.close()  # a worker heals one incident after another: one open session at most
            session = LlmSession(cfg, request.ledger, request.incident_id, api_key=self._api_key)
            self._sessions[request.incident_id] = session
        return session

    def propose_round(
        self,
        evidence: Evidence,
        history: list[PriorAttempt],
        round_no: int,
        session: LlmSession | None = None,
    ) -> LlmRound:
        """Ask for up to `candidates_per_round` candidates in one call.

        Raises BudgetExhausted (before any call) and LlmUnavailable; a malformed answer is a
        round with no candidates and `problem` set.
        """
        session = session or self._bound()
        config = session.config
        prompt = propose_prompt(evidence, history, config)
        wanted = config.candidates_per_round
        request = LlmRequest(prompt.system, prompt.user, propose_tool(wanted), config.max_tokens)
        dropped = [f"cut short: {n}" for n in prompt.packed.cut]
        dropped += [f"dropped: {n}" for n in prompt.packed.dropped]
        result = LlmRound(round=round_no, dropped_context=dropped)
        try:
            metered = session.call(
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
        session = self._bound()
        return second_opinion(
            evidence, verdict, session.config, session.ledger, session.incident_id, session=session
        )

    def _bound(self) -> LlmSession:
        if self.session is None:
            raise PatchitError("LlmStrategy is not bound to an incident: use propose(request)")
        return self.session

    def close(self) -> None:
        """Close every session this strategy opened (idempotent)."""
        if self.session is not None:
            self.session.close()
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

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

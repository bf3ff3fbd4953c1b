"""Budgets and loop guards, checked before a call against the call's upper bound.

The upper bound of a call is its estimated input plus all the output it may produce
(`max_tokens`), priced at the configured rates. The input estimate is deliberately
pessimistic: `ceil(characters / 3.5)` over the system prompt, the user message and the tool
schema, plus `TOOL_OVERHEAD_TOKENS` for the tool-use preamble the API adds. Real usage is
recorded in the ledger afterwards; a budget is never found spent after the fact.
"""

from __future__ import annotations

import json
import math

from patchit.config import LlmConfig
from patchit.errors import PatchitError
from patchit.memory.ledger import Ledger, LlmPurpose
from patchit.patching.llm.client import LlmRequest, price

CHARS_PER_TOKEN = 3.5
TOOL_OVERHEAD_TOKENS = 400


class BudgetExhausted(PatchitError):
    """A model call would exceed a configured limit; the message names the limit."""


def estimate_tokens(text: str) -> int:
    """Input tokens of `text`, estimated as ceil(len / 3.5) (code runs denser than prose)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_input_tokens(request: LlmRequest) -> int:
    schema = json.dumps(request.tool.as_param())
    return (
        estimate_tokens(request.system)
        + estimate_tokens(request.user)
        + estimate_tokens(schema)
        + TOOL_OVERHEAD_TOKENS
    )


class BudgetGuard:
    """Every limit of `LlmConfig`, checked from the ledger for one incident."""

    def __init__(self, config: LlmConfig, ledger: Ledger, incident_id: str) -> None:
        self.config = config
        self.ledger = ledger
        self.incident_id = incident_id

    def check(self, purpose: LlmPurpose, round_no: int, request: LlmRequest) -> None:
        """Raise BudgetExhausted naming the first limit this call could break."""
        cfg = self.config
        est_in = estimate_input_tokens(request)
        tokens = est_in + request.max_tokens
        cost = price(cfg, est_in, request.max_tokens)
        bound = f"this call may use up to {tokens} tokens / ${cost:.4f}"
        if purpose is LlmPurpose.PROPOSE:
            used = self.ledger.rounds_used(self.incident_id)
            if round_no > cfg.max_rounds or (round_no not in used and len(used) >= cfg.max_rounds):
                raise BudgetExhausted(
                    f"llm.max_rounds: {cfg.max_rounds} LLM round(s) per incident already used"
                )
        streak = self.ledger.failed_streak(exclude=self.incident_id)
        if streak >= cfg.breaker_after_failed_incidents:
            raise BudgetExhausted(
                f"llm.breaker_after_failed_incidents: circuit breaker open, the last {streak} "
                "incidents that used the LLM all failed; fix one by hand or raise the limit"
            )
        mine = self.ledger.incident_totals(self.incident_id)
        if mine.tokens + tokens > cfg.max_tokens_per_incident:
            raise BudgetExhausted(
                f"llm.max_tokens_per_incident ({cfg.max_tokens_per_incident}): {mine.tokens} "
                f"used and {bound}"
            )
        if mine.cost_usd + cost > cfg.max_cost_per_incident_usd:
            raise BudgetExhausted(
                f"llm.max_cost_per_incident_usd (${cfg.max_cost_per_incident_usd:g}): "
                f"${mine.cost_usd:.4f} used and {bound}"
            )
        today = self.ledger.day_totals()
        if today.tokens + tokens > cfg.max_tokens_per_day:
            raise BudgetExhausted(
                f"llm.max_tokens_per_day ({cfg.max_tokens_per_day}): {today.tokens} used today "
                f"(UTC) and {bound}"
            )
        if today.cost_usd + cost > cfg.max_cost_per_day_usd:
            raise BudgetExhausted(
                f"llm.max_cost_per_day_usd (${cfg.max_cost_per_day_usd:g}): "
                f"${today.cost_usd:.4f} used today (UTC) and {bound}"
            )

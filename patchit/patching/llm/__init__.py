"""Tier 1: the LLM strategy (Anthropic Messages API with tool use), its budgets and prompts.

The loop builds `LlmStrategy(config.llm, memory, incident_id)` when `llm_enabled(config.llm)`
and drives it by rounds; `ReplayServer` speaks the Messages API locally for tests and the
demo (`replays/demo.json`).
"""

from patchit.patching.llm.budget import BudgetExhausted, BudgetGuard, estimate_tokens
from patchit.patching.llm.client import LlmClient, LlmUnavailable, Usage, llm_enabled
from patchit.patching.llm.second_opinion import second_opinion
from patchit.patching.llm.server import ReplayServer, load_script
from patchit.patching.llm.session import LlmMalformed, LlmSession
from patchit.patching.llm.strategy import LlmRound, LlmStrategy

__all__ = [
    "BudgetExhausted",
    "BudgetGuard",
    "LlmClient",
    "LlmMalformed",
    "LlmRound",
    "LlmSession",
    "LlmStrategy",
    "LlmUnavailable",
    "ReplayServer",
    "Usage",
    "estimate_tokens",
    "llm_enabled",
    "load_script",
    "second_opinion",
]

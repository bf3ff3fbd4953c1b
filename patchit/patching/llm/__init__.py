"""Tier 1: the LLM strategy (Anthropic Messages API with tool use), its budgets and prompts.

`LlmStrategy` is an entry point in `patchit.strategies` like the fix-its: the loop asks it
round after round through `propose(request)`, the request carrying the incident, the config
and the ledger that meters its budget; it is off (no call) without an API key.
`ReplayServer` speaks the Messages API locally for tests and the demo (`replays/demo.json`).
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

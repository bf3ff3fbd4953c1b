"""Patch proposal: strategies (tier 0 rules, tier 1 LLM) and edit application."""

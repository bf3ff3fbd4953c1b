"""Prompts from the jinja2 templates shipped in `patchit/patching/llm/templates/`.

Everything rendered here is redacted twice: each evidence piece before it is measured and
packed, and the finished prompt once more, so no path from the evidence to the API skips it.
"""

from __future__ import annotations

from dataclasses import dataclass

from jinja2 import Environment, PackageLoader, StrictUndefined

from patchit.config import LlmConfig
from patchit.evidence.model import Evidence
from patchit.evidence.redact import redact
from patchit.patching.base import PriorAttempt
from patchit.patching.llm.answers import CLASSIFY_TOOL, PROPOSE_TOOL, TAGS
from patchit.patching.llm.client import PROMPT_MAX_CHARS
from patchit.patching.llm.context import (
    Packed,
    attempts_section,
    evidence_sections,
    pack,
    secrets_of,
)

_env = Environment(
    loader=PackageLoader("patchit.patching.llm", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # plain text for a model, not HTML
)


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str
    packed: Packed


def _render(name: str, **values: object) -> str:
    return _env.get_template(name).render(**values)


def propose_prompt(evidence: Evidence, history: list[PriorAttempt], config: LlmConfig) -> Prompt:
    """The proposal prompt: evidence then earlier attempts, packed to `config.context_tokens`."""
    secrets = secrets_of(evidence)
    sections = [*evidence_sections(evidence), attempts_section(history)]
    packed = pack(sections, config.context_tokens, secrets)
    values = {
        "tool": PROPOSE_TOOL,
        "tags": TAGS,
        "max_candidates": config.candidates_per_round,
        "has_attempts": bool(history),
        "packed": packed,
        "budget": config.context_tokens,
    }
    system = _render("propose_system.j2", **values)
    user = _render("propose_user.j2", **values)
    return _prompt(system, user, secrets, packed)


def classify_prompt(evidence: Evidence, config: LlmConfig) -> Prompt:
    """The second-opinion prompt: the evidence alone, packed to `config.context_tokens`."""
    secrets = secrets_of(evidence)
    packed = pack(evidence_sections(evidence), config.context_tokens, secrets)
    values = {"tool": CLASSIFY_TOOL, "packed": packed, "budget": config.context_tokens}
    system = _render("classify_system.j2", **values)
    user = _render("classify_user.j2", **values)
    return _prompt(system, user, secrets, packed)


def _prompt(system: str, user: str, secrets: list[str], packed: Packed) -> Prompt:
    return Prompt(
        redact(system, secrets, PROMPT_MAX_CHARS), redact(user, secrets, PROMPT_MAX_CHARS), packed
    )

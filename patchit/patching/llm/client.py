"""The one way patchit calls a model: `messages.create` with a forced tool, through the SDK.

Retries and backoff (429, 5xx, 529 overloaded, connection errors) and the timeout are the
SDK's own (`max_retries`, `timeout`): there is no loop around them here. What is left after
the SDK gave up becomes `LlmUnavailable`, one line a human can act on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from patchit.config import LlmConfig
from patchit.errors import PatchitError
from patchit.text.redaction import environment_secrets, redact

if TYPE_CHECKING:  # the SDK (the `llm` extra) loads only when a model is called
    import anthropic
    from anthropic.types import MessageParam, ToolChoiceToolParam, ToolParam


# a prompt is packed to the context budget; redaction must not cut it again
PROMPT_MAX_CHARS = 4_000_000


class LlmUnavailable(PatchitError):
    """The model could not be asked: unreachable, wrong key, rate limited, overloaded, timeout."""


def llm_enabled(config: LlmConfig) -> bool:
    """`enabled` when configured, else on exactly when ANTHROPIC_API_KEY is set."""
    if config.enabled is not None:
        return config.enabled
    return bool(os.environ.get("ANTHROPIC_API_KEY"))


def base_url_of(config: LlmConfig) -> str | None:
    return config.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None


def price(config: LlmConfig, tokens_in: int, tokens_out: int) -> float:
    """Cost in USD at the configured per-million-token prices."""
    return (
        tokens_in * config.price_in_per_mtok_usd + tokens_out * config.price_out_per_mtok_usd
    ) / 1_000_000


@dataclass(frozen=True)
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model must call: its answer is the tool input, shaped by `input_schema`."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def as_param(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True)
class LlmRequest:
    system: str
    user: str
    tool: ToolSpec
    max_tokens: int


@dataclass(frozen=True)
class LlmReply:
    """The model's answer: the forced tool's input (None when it did not call it) and usage."""

    tool_input: dict[str, Any] | None
    usage: Usage
    text: str = ""
    stop_reason: str | None = None
    raw_content: list[dict[str, Any]] = field(default_factory=list)


def _sdk() -> Any:
    """The `anthropic` module; LlmUnavailable when the `llm` extra is not installed."""
    try:
        import anthropic
    except ImportError as exc:
        raise LlmUnavailable(
            "the anthropic package is not installed: pip install 'patchit[llm]'"
        ) from exc
    return anthropic


def _describe(exc: anthropic.APIError, config: LlmConfig, url: str) -> str:
    anthropic = _sdk()
    retries = f"after {config.max_retries} retries" if config.max_retries else "(no retries)"
    if isinstance(exc, anthropic.APITimeoutError):
        return f"the model API at {url} timed out after {config.timeout_s:g} s {retries}"
    if isinstance(exc, anthropic.APIConnectionError):
        return f"the model API at {url} is unreachable ({exc.__cause__ or exc}) {retries}"
    if isinstance(exc, anthropic.AuthenticationError):
        return f"the model API at {url} rejected the API key (401); check ANTHROPIC_API_KEY"
    if isinstance(exc, anthropic.PermissionDeniedError):
        return f"the API key may not use {config.model} (403); check the key's permissions"
    if isinstance(exc, anthropic.RateLimitError):
        return f"the model API rate-limited patchit (429) {retries}; try again later"
    if isinstance(exc, anthropic.APIStatusError):
        status, message = exc.status_code, exc.api_message or exc.message
        if status == 529 or exc.type == "overloaded_error":
            return f"the model API is overloaded (529) {retries}; try again later"
        if status >= 500:
            return f"the model API failed (HTTP {status}: {message}) {retries}"
        return f"the model API refused the request (HTTP {status}: {message})"
    return f"the model API call failed: {exc}"


class LlmClient:
    """`anthropic.Anthropic` configured from `LlmConfig`; `create` returns the tool answer."""

    def __init__(self, config: LlmConfig, api_key: str | None = None) -> None:
        self.config = config
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        self.base_url = base_url_of(config)
        self.where = self.base_url or "api.anthropic.com"
        if not key:
            raise LlmUnavailable(
                "no API key for the model: set ANTHROPIC_API_KEY (or disable llm in .patchit.toml)"
            )
        self._anthropic = _sdk()
        self._sdk = self._anthropic.Anthropic(
            api_key=key,
            base_url=self.base_url,
            timeout=config.timeout_s,
            max_retries=config.max_retries,
        )

    def create(self, request: LlmRequest) -> LlmReply:
        """One `messages.create` forcing `request.tool`; LlmUnavailable when the SDK gives up."""
        tool: ToolParam = {
            "name": request.tool.name,
            "description": request.tool.description,
            "input_schema": request.tool.input_schema,
        }
        choice: ToolChoiceToolParam = {"type": "tool", "name": request.tool.name}
        # the prompt was built from redacted evidence; this is the last gate before it leaves
        secrets = environment_secrets()
        user = redact(request.user, secrets, PROMPT_MAX_CHARS)
        messages: list[MessageParam] = [{"role": "user", "content": user}]
        try:
            message = self._sdk.messages.create(
                model=self.config.model,
                max_tokens=request.max_tokens,
                system=redact(request.system, secrets, PROMPT_MAX_CHARS),
                messages=messages,
                tools=[tool],
                tool_choice=choice,
            )
        except self._anthropic.APIError as exc:
            raise LlmUnavailable(_describe(exc, self.config, self.where)) from exc
        except (self._anthropic.AnthropicError, ValueError) as exc:  # e.g. a body that is not JSON
            raise LlmUnavailable(
                f"the model API at {self.where} sent an unreadable answer ({exc})"
            ) from exc
        tokens_in = int(message.usage.input_tokens or 0)
        tokens_out = int(message.usage.output_tokens or 0)
        usage = Usage(tokens_in, tokens_out, price(self.config, tokens_in, tokens_out))
        tool_input: dict[str, Any] | None = None
        texts: list[str] = []
        raw: list[dict[str, Any]] = []
        for block in message.content:
            raw.append(block.model_dump(mode="json"))
            if block.type == "tool_use" and block.name == request.tool.name and tool_input is None:
                tool_input = block.input if isinstance(block.input, dict) else None
            elif block.type == "text":
                texts.append(block.text)
        return LlmReply(tool_input, usage, "\n".join(texts), message.stop_reason, raw)

    def close(self) -> None:
        self._sdk.close()

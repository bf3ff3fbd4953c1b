"""A metered model call: budget check first, then the call, then its real usage in the ledger.

Every call that reached the API is recorded, whatever became of it (`ok`, `error`,
`malformed`); a call refused by the budget never reaches the API and is not a call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from patchit.config import LlmConfig
from patchit.errors import PatchitError
from patchit.memory.ledger import CallOutcome, Ledger, LlmPurpose
from patchit.patching.llm.budget import BudgetGuard
from patchit.patching.llm.client import LlmClient, LlmRequest, LlmUnavailable, Usage

T = TypeVar("T")


class LlmMalformed(PatchitError):
    """The model answered, but not in the shape the tool asked for (usage was still spent)."""

    def __init__(self, reason: str, usage: Usage) -> None:
        super().__init__(reason)
        self.usage = usage


@dataclass(frozen=True)
class Metered(Generic[T]):
    value: T
    usage: Usage


def _validation_reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"{where}: {first['msg']}"


class LlmSession:
    """The model as one incident sees it: its client, its budget guard, its ledger rows."""

    def __init__(
        self,
        config: LlmConfig,
        ledger: Ledger,
        incident_id: str,
        *,
        api_key: str | None = None,
        client: LlmClient | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.incident_id = incident_id
        self.guard = BudgetGuard(config, ledger, incident_id)
        self._api_key = api_key
        self._client = client

    @property
    def client(self) -> LlmClient:
        if self._client is None:  # built lazily: no key is needed until a call is due
            self._client = LlmClient(self.config, api_key=self._api_key)
        return self._client

    def call(
        self,
        purpose: LlmPurpose,
        round_no: int,
        request: LlmRequest,
        parse: Callable[[dict[str, Any]], T],
    ) -> Metered[T]:
        """Check the budget, ask, record; `parse` turns the tool input into T.

        Raises BudgetExhausted (nothing sent), LlmUnavailable (recorded as `error`) or
        LlmMalformed (recorded as `malformed`, with the usage that was spent).
        """
        self.guard.check(purpose, round_no, request)
        model = self.config.model
        client = self.client  # no key is LlmUnavailable here, before any call is recorded
        try:
            reply = client.create(request)
        except LlmUnavailable as exc:
            self.ledger.record(
                self.incident_id,
                purpose,
                round_no,
                model,
                outcome=CallOutcome.ERROR,
                error=str(exc),
            )
            raise
        usage = reply.usage

        def record(outcome: CallOutcome, error: str = "") -> None:
            self.ledger.record(
                self.incident_id, purpose, round_no, model,
                tokens_in=usage.tokens_in, tokens_out=usage.tokens_out, cost_usd=usage.cost_usd,
                outcome=outcome, error=error,
            )  # fmt: skip

        try:
            if reply.tool_input is None:
                said = f": {reply.text[:120]!r}" if reply.text else ""
                raise LlmMalformed(
                    f"the model did not call the {request.tool.name} tool{said}", usage
                )
            value = parse(reply.tool_input)
        except (ValidationError, LlmMalformed) as exc:
            reason = (
                f"malformed {request.tool.name} answer ({_validation_reason(exc)})"
                if isinstance(exc, ValidationError)
                else str(exc)
            )
            record(CallOutcome.MALFORMED, reason)
            raise LlmMalformed(reason, usage) from exc
        record(CallOutcome.OK)
        return Metered(value, usage)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

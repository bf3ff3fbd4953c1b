"""Patch candidates and the `Strategy` plugin interface (tier 0 rules, tier 1 LLM)."""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from patchit.evidence.model import Evidence
from patchit.memory.records import PriorAttempt as PriorAttempt  # re-exported


class Edit(BaseModel):
    """Replace the exact text `search` (which must occur once) by `replace` in `path`."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="file path relative to the repository root")
    search: str
    replace: str


class PatchCandidate(BaseModel):
    """A proposed fix: search/replace edits plus where they came from."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = Field(description="name of the strategy that proposed it")
    tag: str = Field(description="strategy bucket, e.g. rename_column, fix_ref")
    tier: int = 0
    edits: list[Edit]
    rationale: str
    confidence: float = 1.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


@runtime_checkable
class Strategy(Protocol):
    """Proposes zero or more candidates for one failure. Never edits files itself."""

    name: ClassVar[str]
    tag: ClassVar[str]
    tier: ClassVar[int]

    def propose(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]: ...

"""Patch candidates and the `Strategy` plugin interface (tier 0 rules, tier 1 LLM): a
strategy gets a `ProposalRequest` and answers a `Proposal`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from patchit.config import PatchitConfig
from patchit.evidence.model import Evidence
from patchit.memory.records import PriorAttempt as PriorAttempt  # re-exported

if TYPE_CHECKING:
    from patchit.memory.ledger import Ledger


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
    review: str = Field(
        default="",
        description="why a human must review it even if it verifies (e.g. it drops code the "
        "breaking change added): a passing candidate with a review is never put on a branch",
    )
    follows: dict[str, str] = Field(
        default_factory=dict,
        description="old -> new names of the renames its edits follow to every site: the "
        "policy counts them as one edit kind each (max_files) and caps the sites "
        "(max_rename_sites)",
    )


@dataclass(frozen=True)
class ProposalRequest:
    """What a strategy is given for one round: the evidence, every earlier attempt on the
    fingerprint, and the run's means (config, the LLM ledger that meters its budget)."""

    evidence: Evidence
    history: list[PriorAttempt] = field(default_factory=list)
    round: int = 1
    incident_id: str = ""
    config: PatchitConfig = field(default_factory=PatchitConfig)
    ledger: Ledger | None = None


class Proposal(BaseModel):
    """A strategy's answer for one round. Proposing nothing is an empty proposal, never an
    exception; a tier that must stop (budget spent, API unreachable) says so in `stop`."""

    model_config = ConfigDict(extra="forbid")

    candidates: list[PatchCandidate] = Field(default_factory=list)
    rejected: list[tuple[PatchCandidate, str]] = Field(
        default_factory=list, description="(candidate, reason) that cannot apply: recorded refused"
    )
    notes: list[str] = Field(default_factory=list, description="lines for the user, as they go")
    problem: str = Field(default="", description="why the round yielded nothing usable, if so")
    stop: str = Field(default="", description="the search must stop, and why")
    more: bool = Field(
        default=False, description="ask again (with the updated history) if none verified"
    )
    pick: Literal["first", "smallest"] = Field(
        default="first",
        description="first: candidates are ranked, the first verified wins; smallest: verify "
        "all of the round and the smallest passing diff wins",
    )
    status: str = Field(default="", description="the tier's line in the report, e.g. 'off (...)'")


@runtime_checkable
class Strategy(Protocol):
    """Proposes zero or more candidates for one failure. Never edits files itself.

    Every strategy, tier 0 and the model alike, is an entry point in `patchit.strategies` and
    is driven through these members only. Strategies are asked by (tier, rank, name): within a
    tier, the targeted fix-its (rank 0) come before the general strategies (a partial revert
    of the breaking change ranks last).
    """

    name: ClassVar[str]
    tag: ClassVar[str]
    tier: ClassVar[int]
    rank: ClassVar[int]

    def propose(self, request: ProposalRequest) -> Proposal: ...

    def close(self) -> None: ...


class FixIt(ABC):
    """Base of the deterministic strategies: one round of ranked candidates, the first that
    verifies wins. Subclasses implement `fix`."""

    name: ClassVar[str]
    tag: ClassVar[str]
    tier: ClassVar[int] = 0
    rank: ClassVar[int] = 0  # targeted: asked before the general strategies of its tier

    def propose(self, request: ProposalRequest) -> Proposal:
        return Proposal(candidates=self.fix(request.evidence, request.history))

    @abstractmethod
    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        """The ranked candidates for this failure ([] when the fix-it does not apply)."""

    def candidate(
        self, edits: list[Edit], rationale: str, confidence: float, review: str = ""
    ) -> PatchCandidate:
        """A candidate of this fix-it (its name, tag and tier) making `edits`."""
        return PatchCandidate(
            strategy=self.name,
            tag=self.tag,
            tier=self.tier,
            edits=edits,
            rationale=rationale,
            confidence=confidence,
            review=review,
        )

    def close(self) -> None:  # noqa: B027 - deliberately a no-op default, not abstract
        """Nothing to release."""

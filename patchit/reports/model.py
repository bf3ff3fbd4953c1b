"""`RootCauseReport`: what patchit found, tried and concluded for one incident."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from patchit.evidence.intents import Intent
from patchit.evidence.model import ConversionFinding


class AttemptLine(BaseModel):
    """One row of the report's timeline."""

    model_config = ConfigDict(extra="forbid")

    number: int
    strategy: str
    tag: str
    tier: int = 0
    files: list[str] = Field(default_factory=list)
    outcome: str
    reason: str = ""
    diff: str = ""
    command: str = ""
    output_tail: str = ""
    duration_ms: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class LlmSummary(BaseModel):
    """What the model tier spent on this incident (from the call ledger)."""

    model_config = ConfigDict(extra="forbid")

    model: str = ""
    rounds: int = 0
    calls: int = 0
    candidates: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class UncommittedWork(BaseModel):
    """The uncommitted work a failure ran on, made a commit (`patchit.intake.worktree_snapshot`)."""

    model_config = ConfigDict(extra="forbid")

    snapshot: str = Field(description="the snapshot commit (not on any branch)")
    base: str = Field(description="HEAD when it was taken")
    files: list[str] = Field(default_factory=list, description="the uncommitted files")


class RootCauseReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    incident_id: str
    status: str
    classification: str
    signature: str
    reason: str
    fingerprint: str
    source: str
    pipeline_id: str
    unit_id: str
    unit_path: str | None = None
    error_type: str
    error_message: str
    repo_path: str | None = None
    commit: str | None = None
    uncommitted: UncommittedWork | None = Field(
        default=None,
        description="when it failed on uncommitted work: `commit` is a snapshot of it on `base`",
    )
    events: int = 1
    latest_commit: str | None = Field(
        default=None, description="the commit of the newest event, when it is not `commit`"
    )
    last_seen_utc: datetime | None = Field(default=None, description="the newest event's time")
    outcome: str | None = Field(
        default=None, description="after merge (`patchit track`): fixed, no_effect, regression"
    )
    related_units: list[str] = Field(default_factory=list)
    attempts: list[AttemptLine] = Field(default_factory=list)
    tiers_run: list[str] = Field(default_factory=list)
    branch: str | None = None
    pull_request: str | None = Field(default=None, description="set by `patchit pr`")
    diff: str | None = None
    verification: str | None = Field(default=None, description="harness, isolation, result")
    unit_verdicts: dict[str, str] = Field(
        default_factory=dict,
        description="each failed unit of the incident and how it ended in the fix's run (else "
        "in the last candidate's run): every one must pass for the incident to be fixed",
    )
    data_check: str | None = Field(
        default=None, description="the data-aware check of the winner, or of a refused candidate"
    )
    needs_review: bool = Field(
        default=False, description="a candidate passed but changed outputs it should not have"
    )
    confidence: float | None = Field(default=None, description="of a verified fix, 0..1")
    confidence_signals: list[str] = Field(default_factory=list, description="what it is from")
    llm: LlmSummary | None = None
    next_actions: list[str] = Field(default_factory=list)
    needs_human: bool = True
    stop_reason: str = ""
    evidence_notes: list[str] = Field(default_factory=list)
    failing_rows: list[dict[str, str]] = Field(default_factory=list)
    changed_files: list[str] = Field(default_factory=list)
    changed_since: str | None = Field(default=None, description="last good commit, if known")
    change_range: str | None = Field(
        default=None, description="the breaking change: <good commit>..<failing commit>"
    )
    unit_files: list[str] = Field(
        default_factory=list,
        description="files the failing unit depends on (and data files) that the change touched",
    )
    unit_hunks: str = Field(
        default="", description="the hunks of the breaking change in those files"
    )
    intents: list[Intent] = Field(
        default_factory=list, description="what the breaking change meant, read by parsers"
    )
    reverts: str | None = Field(
        default=None,
        description="'reverts your change: <intent>' when a passing candidate undid an intent "
        "of the change (it needs review and was not put on a branch)",
    )
    forward_tried: list[str] = Field(
        default_factory=list,
        description="with `reverts`: the other candidates tried (strategy, tag, outcome)",
    )
    conversion: ConversionFinding | None = Field(
        default=None, description="a conversion error's column, its type and offending values"
    )
    recent_history: list[str] = Field(default_factory=list)
    generated_utc: datetime = Field(default_factory=lambda: datetime.now(UTC))

"""What the attempt memory hands out: incidents, attempt records, their states, and the
history strategies are shown (`PriorAttempt`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class IncidentStatus(StrEnum):
    OPEN = "open"
    FIXED = "fixed"
    ESCALATED = "escalated"
    FAILED = "failed"


class AttemptOutcome(StrEnum):
    VERIFIED = "verified"
    FAILED = "failed"
    REFUSED = "refused"
    HARNESS_LIMIT = "harness_limit"
    NEEDS_REVIEW = "needs_review"  # the run passed, the data check found unmeant differences
    SCREENED_OUT = "screened_out"  # the harness's screen was certain it fails: never verified
    ERROR = "error"  # the strategy raised instead of proposing: no candidate, no run


class Incident(BaseModel):
    """One problem being healed: failures grouped by cause key, repository and time window."""

    model_config = ConfigDict(extra="forbid")

    id: str
    fingerprint: str
    cause_key: str
    repo_path: str | None = None
    repo_url: str | None = None  # normalised remote URL, else bundle:NAME (repo_identity)
    status: IncidentStatus = IncidentStatus.OPEN
    classification: str | None = None
    branch: str | None = None
    report_md: str | None = None
    report_json: str | None = None
    summary: str = ""
    created_utc: datetime
    updated_utc: datetime
    needs_human: bool = False
    needs_review: bool = False  # a candidate passed but changed outputs it should not have
    attempts: int = 0
    events: int = 0
    pr_url: str | None = None  # the pull request `patchit pr` opened for the fix
    pr_state: str | None = None
    outcome: str | None = None  # after merge (`patchit track`): fixed, no_effect, regression


class AttemptRecord(BaseModel):
    """One recorded attempt: a candidate, its diff and what became of it."""

    model_config = ConfigDict(extra="forbid")

    id: int
    incident_id: str
    fingerprint: str
    diff_hash: str
    strategy: str
    tag: str
    tier: int
    files: list[str]
    diff: str
    outcome: AttemptOutcome
    reason: str
    verification_output: str
    duration_ms: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    created_utc: datetime
    commit: str | None = None  # the failing commit it was verified on
    verified_json: str | None = None  # a verified candidate, its verification and data check
    landed_branch: str | None = None  # where a verified candidate landed


class PriorAttempt(BaseModel):
    """What memory knows of an earlier attempt on the same fingerprint."""

    model_config = ConfigDict(extra="forbid")

    diff_hash: str
    tag: str
    outcome: str
    diff: str = ""
    reason: str = ""
    output: str = Field(default="", description="verification output (tail), redacted")


REVERTS = "reverts your change"  # the label of a candidate that undid an intent of the change
JOINED = "combined"  # the strategy of a forward candidate joined with a revert (`loop.combine`)


def revert_label_of(attempts: list[AttemptRecord]) -> str | None:
    """'reverts your change: <intent>' of the last passing candidate that undid an intent."""
    for attempt in reversed(attempts):
        at = attempt.reason.find(f"{REVERTS}: ")
        if attempt.outcome == "needs_review" and at >= 0:
            return attempt.reason[at:].split("; ", 1)[0]
    return None


def held_advice(incident_id: str) -> str:
    """What lands a candidate held because it reverts the change, if that is what is meant."""
    return (
        f'to land it anyway, set `[policy] revert = "allow"` in $PATCHIT_HOME/patchit.toml '
        f"and run `patchit heal {incident_id}` (it is verified again first)"
    )


RECORDED_ONLY = "recorded, not healed"


def recorded_only_summary(incident_id: str, why: str) -> str:
    """The summary of an incident a run recorded without healing it (`--no-heal`)."""
    return f"{RECORDED_ONLY} ({why}): `patchit heal {incident_id}` heals it"

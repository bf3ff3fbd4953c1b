"""Failure classes and the classifier's verdict."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class FailureClass(StrEnum):
    CODE_BUG = "code_bug"
    ENV_MISMATCH = "env_mismatch"
    DEPENDENCY_ISSUE = "dependency_issue"
    INFRA_ISSUE = "infra_issue"
    DATA_ISSUE = "data_issue"
    UNKNOWN = "unknown"


class Verdict(BaseModel):
    """What the classifier concluded and why (the signature that matched)."""

    model_config = ConfigDict(extra="forbid")

    cls: FailureClass
    signature: str = Field(description="name of the matched signature, or 'none'")
    reason: str = Field(description="one sentence a human can check against the evidence")
    next_actions: list[str] = Field(default_factory=list)

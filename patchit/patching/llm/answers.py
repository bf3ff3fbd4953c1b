"""What the model must answer: the tools it is forced to call and the models that read them.

The JSON schemas are what the API is given; the pydantic models are what patchit trusts.
Validation is lenient where a wrong value has a safe reading (an unknown strategy tag is
`other`, a confidence outside [0, 1] is clamped) and strict where it has none (a missing
field, an edit that is not three strings).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from patchit.classify.model import FailureClass
from patchit.patching.llm.client import ToolSpec
from patchit.text.redaction import clean_text

TAGS = (
    "rename_column",
    "fix_ref",
    "add_guard",
    "create_dir",
    "fix_import",
    "schema_tolerant",
    "path_fix",
    "other",
)
PROPOSE_TOOL = "propose_patches"
CLASSIFY_TOOL = "classify_failure"


class Answer(BaseModel):
    """A part of a model's answer: its texts made safe (lone surrogates escaped) as it is read,
    so a path, a commit message or a report never holds what cannot be encoded."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        return _cleaned(data) if isinstance(data, dict) else data


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {k: _cleaned(v) if isinstance(v, str | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) if isinstance(v, str) else v for v in value]
    return value


class EditAnswer(Answer):
    model_config = ConfigDict(extra="ignore")

    file: str
    search: str
    replace: str


class CandidateAnswer(Answer):
    model_config = ConfigDict(extra="ignore")

    edits: list[EditAnswer]
    strategy_tag: str
    rationale: str
    confidence: float = 0.5

    @field_validator("strategy_tag")
    @classmethod
    def _known_tag(cls, value: str) -> str:
        value = value.strip().lower()
        return value if value in TAGS else "other"

    @field_validator("confidence")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return min(1.0, max(0.0, value))


class ProposalAnswer(Answer):
    model_config = ConfigDict(extra="ignore")

    candidates: list[CandidateAnswer]


class ClassifyAnswer(Answer):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    cls: FailureClass = Field(alias="class")
    reason: str
    evidence_quotes: list[str] = Field(default_factory=list)


def propose_tool(max_candidates: int) -> ToolSpec:
    edit = {
        "type": "object",
        "properties": {
            "file": {"type": "string", "description": "path relative to the repository root"},
            "search": {
                "type": "string",
                "description": "exact text of the file to replace; must occur exactly once",
            },
            "replace": {"type": "string", "description": "the text that replaces it"},
        },
        "required": ["file", "search", "replace"],
    }
    candidate = {
        "type": "object",
        "properties": {
            "edits": {"type": "array", "items": edit, "minItems": 1},
            "strategy_tag": {"type": "string", "enum": list(TAGS)},
            "rationale": {"type": "string", "description": "one sentence: cause and fix"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["edits", "strategy_tag", "rationale", "confidence"],
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "candidates": {"type": "array", "items": candidate, "maxItems": max_candidates}
        },
        "required": ["candidates"],
    }
    return ToolSpec(
        PROPOSE_TOOL,
        "Propose up to the requested number of alternative patches, most likely first, "
        "each as search/replace edits on repository files.",
        schema,
    )


def classify_tool() -> ToolSpec:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "class": {"type": "string", "enum": [c.value for c in FailureClass]},
            "reason": {"type": "string", "description": "one sentence a human can check"},
            "evidence_quotes": {
                "type": "array",
                "items": {"type": "string"},
                "description": "short verbatim quotes of the evidence that support the class",
            },
        },
        "required": ["class", "reason", "evidence_quotes"],
    }
    return ToolSpec(CLASSIFY_TOOL, "Classify the failure and quote the evidence for it.", schema)

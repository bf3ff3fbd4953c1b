"""The evidence as prompt sections, in priority order, redacted and packed to a token budget.

Order (the issue's): the breaking change's diff, the failing unit (error, log and traceback
frames, its code raw and compiled), its neighbours (upstream relations and their columns,
YAML properties, tests, related code), history (git log, changed files), then the earlier
attempts on this fingerprint. Packing keeps that order strictly: pieces go in while they fit;
the first that does not is cut (when a useful part still fits) and everything after it is
dropped, and the prompt names what was cut and dropped. No single piece may take more than
half the budget, so a huge diff cannot crowd out the error itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from patchit.evidence.model import Evidence
from patchit.evidence.redact import environment_secrets, profile_secrets, redact
from patchit.patching.base import PriorAttempt
from patchit.patching.llm.budget import CHARS_PER_TOKEN, estimate_tokens

MIN_CUT_TOKENS = 150
ATTEMPT_DIFF_CHARS = 3_000
ATTEMPT_OUTPUT_CHARS = 1_500
_CUT = "\n[... cut to fit the context budget]"
_PIECE_OVERHEAD = 8  # the piece's heading and separators in the template


@dataclass
class Piece:
    label: str
    text: str
    cut: bool = False


@dataclass
class Section:
    key: str
    title: str
    pieces: list[Piece] = field(default_factory=list)

    def add(self, label: str, text: str | None) -> None:
        if text and text.strip():
            self.pieces.append(Piece(label, text.rstrip("\n")))


@dataclass
class Packed:
    sections: list[Section]
    dropped: list[str]
    cut: list[str]
    tokens: int


def secrets_of(evidence: Evidence) -> list[str]:
    """Literal secrets to mask before sending: the environment's (Airflow connection URIs
    included) and any in the verbatim dbt --vars (as the loop masks verification output)."""
    found = environment_secrets()
    raw_vars = evidence.event.dbt.replay_vars() if evidence.event.dbt else None
    if raw_vars:
        found += profile_secrets(raw_vars)
    return found


def _code(path: str | None, text: str | None) -> str | None:
    return f"--- {path or 'unknown file'}\n{text}" if text else None


def _failure_text(evidence: Evidence) -> str:
    event = evidence.event
    lines = [
        f"source: {event.source.value}, pipeline: {event.pipeline_id}, unit: {event.unit_id}",
        f"status: {event.status}"
        + (f", error type: {event.error_type}" if event.error_type else ""),
    ]
    if evidence.unit_path:
        lines.append(f"file: {evidence.unit_path}")
    if event.dbt is not None:
        lines.append(f"dbt command: dbt {' '.join(event.dbt.args) or event.dbt.command}")
    lines += ["error:", evidence.error or event.error_message or "(no error text)"]
    return "\n".join(lines)


def _frames(evidence: Evidence) -> str:
    return "\n".join(
        f"{f.path}:{f.line} in {f.function}: {f.code}"
        + (f"  locals: {json.dumps(f.locals)}" if f.locals else "")
        for f in evidence.frames
    )


def evidence_sections(evidence: Evidence) -> list[Section]:
    """The evidence as sections in priority order (attempts are added by the caller)."""
    event = evidence.event
    base = evidence.last_good_commit[:12] if evidence.last_good_commit else "HEAD~1"
    change = Section("breaking_change", f"The change that broke it ({base} -> failing commit)")
    change.add("diff", evidence.breaking_diff)

    unit = Section("failing_unit", "The failing unit")
    unit.add("failure", _failure_text(evidence))
    log = evidence.packed_log or event.traceback or event.log_excerpt
    unit.add("log (error, traceback frames in the repository)", log)
    if not evidence.packed_log:
        unit.add("traceback frames in the repository", _frames(evidence))
    unit.add("code (raw)", _code(evidence.unit_path, evidence.raw_code))
    compiled_name = f"{evidence.unit_path or 'unit'} as compiled (do not edit this text)"
    unit.add("code (compiled)", _code(compiled_name, evidence.compiled_code))
    unit.add(f"task callable {evidence.callable_name}", evidence.callable_code)
    unit.add(
        "rendered template fields",
        json.dumps(evidence.rendered_fields, indent=1) if evidence.rendered_fields else None,
    )
    if evidence.failing_rows:
        unit.add("sample of failing rows", json.dumps(evidence.failing_rows[:20], indent=1))

    near = Section("neighbours", "Its neighbours")
    for rel in evidence.upstream:
        cols = ", ".join(rel.columns) or "(columns unknown)"
        near.add(f"upstream {rel.name}", f"{rel.relation or rel.name}: {cols}")
    for path, text in evidence.properties.items():
        near.add(f"properties {path}", _code(path, text))
    near.add("tests on the unit", "\n".join(evidence.tests))
    for path, text in evidence.related_code.items():
        near.add(f"related code {path}", _code(path, text))

    history = Section("history", "History")
    history.add("recent commits of the files", "\n".join(evidence.git_log))
    history.add("files changed since the last good commit", "\n".join(evidence.changed_files))
    history.add("what could not be gathered", "\n".join(evidence.notes))
    return [change, unit, near, history]


def attempts_section(history: Iterable[PriorAttempt]) -> Section:
    """Earlier attempts on this fingerprint, each with its diff, output tail and failure."""
    section = Section("attempts", "Earlier attempts on this failure (do not repeat them)")
    for number, attempt in enumerate(history, start=1):
        diff = attempt.diff[:ATTEMPT_DIFF_CHARS] or "(no diff: the edits did not apply)"
        output = attempt.output[-ATTEMPT_OUTPUT_CHARS:] if attempt.output else "(not run)"
        text = (
            f"outcome: {attempt.outcome}; strategy: {attempt.tag}\n"
            f"why it failed: {attempt.reason or '(no reason recorded)'}\n"
            f"diff:\n{diff}\nverification output (tail):\n{output}"
        )
        section.add(f"attempt {number}", text)
    return section


def pack(sections: list[Section], budget_tokens: int, secrets: list[str]) -> Packed:
    """Redact every piece, then keep pieces in order while they fit `budget_tokens`."""
    used, cut, dropped = 0, [], []
    kept: list[Section] = []
    full = False
    per_piece = budget_tokens // 2
    for section in sections:
        out = Section(section.key, section.title)
        for piece in section.pieces:
            name = f"{section.title}: {piece.label}"
            if full:
                dropped.append(name)
                continue
            text = redact(piece.text, secrets)
            remaining = budget_tokens - used
            room = min(remaining, per_piece)
            cost = estimate_tokens(piece.label + text) + _PIECE_OVERHEAD
            if cost > room:
                if room < MIN_CUT_TOKENS:
                    dropped.append(name)
                    full = True
                    continue
                keep = int((room - _PIECE_OVERHEAD) * CHARS_PER_TOKEN) - len(piece.label + _CUT)
                text = text[: max(keep, 0)] + _CUT
                cost = estimate_tokens(piece.label + text) + _PIECE_OVERHEAD
                cut.append(name)
                full = remaining <= per_piece  # the budget, not the per-piece cap, ran out
            out.pieces.append(Piece(piece.label, text, cut=text.endswith(_CUT)))
            used += cost
        if out.pieces:
            kept.append(out)
    return Packed(kept, dropped, cut, used)

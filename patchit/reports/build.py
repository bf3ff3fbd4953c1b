"""Assemble a `RootCauseReport` from what the loop found, tried and concluded."""

from __future__ import annotations

from patchit.classify.model import FailureClass, Verdict
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.fidelity import DataCheck
from patchit.harnesses.base import Verification
from patchit.memory import AttemptRecord, Incident
from patchit.patching.base import PatchCandidate
from patchit.reports.confidence import fix_confidence
from patchit.reports.model import AttemptLine, LlmSummary, RootCauseReport

_OUTPUT_TAIL_LINES = 25
_NODE_KINDS = {"model", "seed", "snapshot", "test", "unit_test", "source"}


def _capped(units: list[str], keep: int = 20) -> list[str]:
    """A storm lists hundreds of units: the report names a few and counts the rest."""
    if len(units) <= keep:
        return units
    return [*units[:keep], f"... and {len(units) - keep} more"]


def _tail(text: str, lines: int = _OUTPUT_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _attempt_lines(attempts: list[AttemptRecord]) -> list[AttemptLine]:
    lines = []
    for number, a in enumerate(attempts, start=1):
        output = a.verification_output or ""
        command = output.splitlines()[0].removeprefix("$ ") if output.startswith("$ ") else ""
        lines.append(
            AttemptLine(
                number=number,
                strategy=a.strategy,
                tag=a.tag,
                tier=a.tier,
                files=a.files,
                outcome=a.outcome,
                reason=a.reason,
                diff=a.diff,
                command=command,
                output_tail=_tail(output),
                duration_ms=a.duration_ms,
                tokens=a.tokens_in + a.tokens_out,
                cost_usd=a.cost_usd,
            )
        )
    return lines


def _next_actions(
    status: str,
    event: UniversalFailureEvent,
    verdict: Verdict | None,
    commands: list[str],
) -> list[str]:
    if status == "fixed":
        return [*commands, "review the diff, then merge the branch or open a pull request from it"]
    actions = list(verdict.next_actions) if verdict else []
    if event.unit_path:
        actions.append(f"read {event.unit_path} at commit {(event.commit or 'HEAD')[:12]}")
    if event.log_location:
        actions.append(f"read the log {event.log_location}")
    kind = event.unit_id.split(".")[0]
    if event.dbt is not None and kind in _NODE_KINDS and event.unit_id.count(".") >= 2:
        name = event.unit_id.split(".")[2]
        actions.append(f"re-run it: cd {event.dbt.cwd} && dbt build --select {name}")
    return list(dict.fromkeys(actions))


def build_report(
    *,
    incident: Incident,
    event: UniversalFailureEvent,
    evidence: Evidence | None,
    verdict: Verdict | None,
    attempts: list[AttemptRecord],
    winner: tuple[PatchCandidate, str, Verification] | None,
    stop_reason: str,
    commands: list[str],
    events: int,
    tiers: list[str] | None = None,
    data_check: DataCheck | None = None,
    llm: LlmSummary | None = None,
) -> RootCauseReport:
    status = incident.status.value if hasattr(incident.status, "value") else str(incident.status)
    verification = None
    diff = None
    confidence = None
    if winner is not None:
        candidate, diff, result = winner
        confidence = fix_confidence(
            signature=verdict.signature if verdict else "none",
            strategy=candidate.strategy,
            tier=candidate.tier,
            fidelity=result.fidelity,
            data_check=data_check,
            passing=len({a.diff_hash for a in attempts if a.outcome == "verified"}),
        )
        verification = (
            f"`{result.command}` passed in {result.duration_ms / 1000:.1f} s "
            f"(harness `{result.harness}`, isolation `{result.isolation}`, fidelity "
            f"`{result.fidelity}`, data check: {data_check.summary if data_check else 'not run'})."
            f" Candidate from `{candidate.strategy}` "
            f"(tier {candidate.tier}, tag `{candidate.tag}`): {candidate.rationale}"
        )
    cls = verdict.cls.value if verdict else FailureClass.UNKNOWN.value
    return RootCauseReport(
        incident_id=incident.id,
        status=status,
        classification=cls,
        signature=verdict.signature if verdict else "none",
        reason=verdict.reason if verdict else "not classified",
        fingerprint=incident.fingerprint,
        source=event.source.value,
        pipeline_id=event.pipeline_id,
        unit_id=event.unit_id,
        unit_path=event.unit_path,
        error_type=event.error_type,
        error_message=event.error_message,
        repo_path=event.repo_path,
        commit=event.commit,
        events=events,
        related_units=_capped(list(event.context.get("related_units", []))),
        attempts=_attempt_lines(attempts),
        tiers_run=list(tiers or []),
        branch=incident.branch,
        diff=diff,
        verification=verification,
        data_check=data_check.markdown() if data_check else None,
        needs_review=bool(data_check and data_check.needs_review),
        confidence=confidence.score if confidence else None,
        confidence_signals=confidence.signals if confidence else [],
        llm=llm,
        next_actions=_next_actions(status, event, verdict, commands),
        needs_human=status != "fixed",
        stop_reason=stop_reason,
        evidence_notes=list(evidence.notes) if evidence else [],
        failing_rows=list(evidence.failing_rows) if evidence else [],
        changed_files=list(evidence.changed_files) if evidence else [],
        changed_since=evidence.last_good_commit if evidence else None,
        recent_history=list(evidence.git_log) if evidence else [],
    )

"""Assemble a `RootCauseReport` from what the loop found, tried and concluded."""

from __future__ import annotations

from patchit.classify.model import FailureClass, Verdict
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.intents import change_intents
from patchit.evidence.model import Evidence
from patchit.evidence.unit_files import unit_change
from patchit.fidelity import DataCheck
from patchit.harnesses.base import Verification
from patchit.intake.worktree_snapshot import snapshot_of
from patchit.memory import AttemptRecord, Incident
from patchit.memory.records import JOINED, REVERTS, held_advice, revert_label_of
from patchit.patching.base import PatchCandidate
from patchit.reports.confidence import fix_confidence
from patchit.reports.model import AttemptLine, LlmSummary, RootCauseReport, UncommittedWork

_OUTPUT_TAIL_LINES = 25
_NODE_KINDS = {"model", "seed", "snapshot", "test", "unit_test", "source"}


def _capped(units: list[str], keep: int = 20) -> list[str]:
    """A storm lists hundreds of units: the report names a few and counts the rest."""
    if len(units) <= keep:
        return units
    return [*units[:keep], f"... and {len(units) - keep} more"]


def _set_aside(units: list[str]) -> str:
    """What the verification set aside (`Verification.set_aside`), as a sentence, or ""."""
    if not units:
        return ""
    named = ", ".join(f"`{u}`" for u in units)
    return f" Set aside, failing on this line before this change and not edited by it: {named}."


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


def _forward_tried(attempts: list[AttemptRecord]) -> list[str]:
    return [
        f"{a.strategy} (`{a.tag}`): {a.outcome}" + (f": {a.reason}" if a.reason else "")
        for a in attempts
        if REVERTS not in a.reason and a.outcome != "error" and a.strategy != JOINED
    ]  # a joined candidate holds a revert: it never kept the whole change


def _is_yaml(path: str | None) -> bool:
    return bool(path) and str(path).endswith((".yml", ".yaml"))


def _next_actions(
    status: str,
    event: UniversalFailureEvent,
    evidence: Evidence | None,
    verdict: Verdict | None,
    commands: list[str],
    unit_files: list[str],
) -> list[str]:
    if status == "fixed" and snapshot_of(event) is not None:
        return [*commands, "review the diff, then apply it to your working tree (or check out "
                "the branch: it holds your uncommitted work and the fix)"]  # fmt: skip
    if status == "fixed":
        return [*commands, "review the diff, then merge the branch or open a pull request from it"]
    actions = list(verdict.next_actions) if verdict else []
    failing = (event.commit or "HEAD")[:12]
    base = evidence.change_base[:12] if evidence and evidence.change_base else None
    if event.unit_path:
        actions.append(f"read {event.unit_path} at the failing commit {failing}")
    if base and unit_files:
        actions.append(f"git diff {base}..{failing} -- {' '.join(unit_files)}")
    if base and event.unit_path and event.unit_path in unit_files:
        actions.append(f"the last good version: git show {base}:{event.unit_path}")
    if event.log_location:
        actions.append(f"read the log {event.log_location}")
    if event.dbt is not None:
        kind = event.unit_id.split(".")[0]
        cd = f"cd {event.dbt.cwd} && "
        if _is_yaml(event.unit_path) and kind not in _NODE_KINDS:
            actions.append(f"re-parse it: {cd}dbt parse{event.dbt.user_flags()}")
        elif kind in _NODE_KINDS and event.unit_id.count(".") >= 2:
            name = event.unit_id.split(".")[2]
            actions.append(f"re-run it: {cd}dbt build --select {name}{event.dbt.user_flags()}")
    return list(dict.fromkeys(actions))


def _why(verdict: Verdict | None, stop_reason: str, event: UniversalFailureEvent) -> str:
    """The report's "Why": the verdict's reason; never empty, whatever stopped the run."""
    if verdict is not None and verdict.reason.strip():
        return verdict.reason.strip()
    first = next((ln.strip() for ln in event.error_message.splitlines() if ln.strip()), "")
    said = f" ({first[:160]})" if first else ""
    if stop_reason.strip():
        return f"{event.unit_id} failed{said}; it was not classified: {stop_reason.strip()}"
    return f"{event.unit_id} failed{said}; it was not classified."


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
    unit_verdicts: dict[str, str] | None = None,
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
            f"{_set_aside(result.set_aside)} Candidate from `{candidate.strategy}` "
            f"(tier {candidate.tier}, tag `{candidate.tag}`): {candidate.rationale}"
        )
    cls = verdict.cls.value if verdict else FailureClass.UNKNOWN.value
    unit_files, unit_hunks = unit_change(evidence) if evidence else ([], "")
    base = evidence.change_base if evidence else None
    reverts = revert_label_of(attempts) if winner is None else None
    work = snapshot_of(event)
    return RootCauseReport(
        incident_id=incident.id,
        status=status,
        classification=cls,
        signature=verdict.signature if verdict else "none",
        reason=_why(verdict, stop_reason, event),
        fingerprint=incident.fingerprint,
        source=event.source.value,
        pipeline_id=event.pipeline_id,
        unit_id=event.unit_id,
        unit_path=event.unit_path,
        error_type=event.error_type,
        error_message=event.error_message,
        repo_path=event.repo_path,
        commit=event.commit,
        uncommitted=UncommittedWork(**work.as_context()) if work else None,
        events=events,
        related_units=_capped(list(event.context.get("related_units", []))),
        attempts=_attempt_lines(attempts),
        tiers_run=list(tiers or []),
        branch=incident.branch,
        diff=diff,
        verification=verification,
        unit_verdicts=dict(winner[2].units if winner is not None else unit_verdicts or {}),
        data_check=data_check.markdown() if data_check else None,
        needs_review=bool(data_check and data_check.needs_review),
        confidence=confidence.score if confidence else None,
        confidence_signals=confidence.signals if confidence else [],
        llm=llm,
        next_actions=[
            *([f"held for review: {reverts}; {held_advice(incident.id)}"] if reverts else []),
            *_next_actions(status, event, evidence, verdict, commands, unit_files),
        ],
        needs_human=status != "fixed",
        stop_reason=stop_reason,
        evidence_notes=list(evidence.notes) if evidence else [],
        failing_rows=list(evidence.failing_rows) if evidence else [],
        changed_files=list(evidence.changed_files) if evidence else [],
        changed_since=evidence.last_good_commit if evidence else None,
        recent_history=list(evidence.git_log) if evidence else [],
        change_range=f"{base[:12]}..{(event.commit or 'HEAD')[:12]}" if base else None,
        unit_files=unit_files,
        unit_hunks=unit_hunks,
        intents=change_intents(evidence) if evidence else [],
        reverts=reverts,
        forward_tried=_forward_tried(attempts) if reverts else [],
        conversion=evidence.conversion if evidence else None,
    )

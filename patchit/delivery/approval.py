"""Approval modes and human reviews of a verified fix.

- `supervised` (default): the branch is made; a human runs `patchit pr` (or `patchit approve`).
- `autonomous`: the pull request opens as soon as the fix is verified.
- `threshold`: autonomous when the report's confidence reaches `min_confidence` and the fix
  touches no `critical_paths`; otherwise it waits for a human.
`patchit reject ID --why` is recorded and feeds the attempt memory: the rejected diff and its
strategy's tag count as failed for the fingerprint, so they are not offered again.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchit.config import DeliveryConfig, PatchitConfig
from patchit.delivery.deliver import ForgeFactory, deliver, github_forge
from patchit.errors import BadInputError, PatchitError
from patchit.memory import Memory
from patchit.memory.lifecycle import Trigger
from patchit.memory.records import AttemptOutcome, Incident, IncidentStatus
from patchit.policy.policy import match_glob
from patchit.reports.model import RootCauseReport
from patchit.reports.refresh import refresh_report
from patchit.sandbox.git import run_git

Say = Callable[[str], None]


def auto_deliver(
    incident: Incident,
    memory: Memory,
    say: Say,
    config: PatchitConfig,
    forge_factory: ForgeFactory = github_forge,
) -> None:
    """After a heal: open the pull request when the repository's mode allows it. Never raises:
    a fix that could not be delivered is still a verified local branch."""
    if incident.status is not IncidentStatus.FIXED or not incident.repo_path:
        return
    delivery = config.delivery
    try:
        wait = _why_wait(incident, delivery)
        if wait is not None:
            if delivery.mode != "supervised":
                say(f"pull request waits for a human: {wait}; run `patchit pr {incident.id}`")
            return
        pull = deliver(incident.id, memory, forge_factory, config)
        say(f"pull request #{pull.number} {'opened' if pull.created else 'updated'} {pull.url}")
    except PatchitError as exc:
        say(f"pull request not opened: {exc}")


def _why_wait(incident: Incident, delivery: DeliveryConfig) -> str | None:
    if delivery.mode == "supervised":
        return "supervised mode"
    if delivery.mode == "autonomous":
        return None
    report = _report(incident)
    score = report.confidence if report else None
    if score is None or score < delivery.min_confidence:
        return f"confidence {score if score is not None else '?'} < {delivery.min_confidence}"
    critical = _critical(incident, delivery.critical_paths)
    return f"the fix touches a critical path ({critical})" if critical else None


def _report(incident: Incident) -> RootCauseReport | None:
    path = Path(incident.report_json or "")
    if not path.is_file():
        return None
    return RootCauseReport.model_validate_json(path.read_text(encoding="utf-8"))


def _critical(incident: Incident, globs: list[str]) -> str | None:
    if not globs or not incident.branch or not incident.repo_path:
        return None
    ref = f"refs/heads/{incident.branch}"
    files = run_git(Path(incident.repo_path), "diff", "--name-only", f"{ref}~1", ref).split()
    return next((f for f in files if match_glob(f, globs) is not None), None)


@dataclass(frozen=True)
class _Edit:
    path: str


@dataclass(frozen=True)
class _Rejected:
    """The rejected fix as the attempt memory records a candidate."""

    strategy: str
    tag: str
    tier: int
    edits: list[_Edit] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


def approve(incident_id: str, memory: Memory, why: str = "") -> Incident:
    incident = memory.get_incident(incident_id)
    if incident.status is not IncidentStatus.FIXED:
        raise BadInputError(
            f"incident {incident_id} is {incident.status.value}: only a verified fix is approved"
        )
    memory.record_review(incident_id, "approved", why, _who())
    return incident


def reject(incident_id: str, memory: Memory, why: str) -> Incident:
    if not why.strip():
        raise BadInputError("patchit reject: --why is required; say what is wrong with the fix")
    incident = memory.get_incident(incident_id)
    verified = [a for a in memory.attempts_for(incident_id) if a.outcome == "verified"]
    if incident.status is not IncidentStatus.FIXED or not verified:
        raise BadInputError(
            f"incident {incident_id} is {incident.status.value}: there is no verified fix to reject"
        )
    fix = verified[-1]
    who = _who()
    memory.record_review(incident_id, "rejected", why, who)
    rejected = _Rejected(fix.strategy, fix.tag, fix.tier, [_Edit(p) for p in fix.files])
    memory.record_attempt(
        incident_id, fix.fingerprint, rejected, fix.diff, AttemptOutcome.FAILED,
        reason=f"rejected by {who}: {why}",
    )  # fmt: skip
    if incident.branch and incident.repo_path:
        # kept for the record, out of the way of the next fix's `patchit/<id>`
        repo, ref = Path(incident.repo_path), f"refs/heads/{incident.branch}"
        if run_git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).strip():
            run_git(repo, "branch", "-M", incident.branch, f"{incident.branch}-rejected")
    rejected_incident = memory.transition(
        incident_id, Trigger.REJECTED, needs_human=True, branch=None
    )
    refresh_report(memory, incident_id)
    return rejected_incident


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"

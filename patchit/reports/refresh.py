"""Keep a written report true: every change to an incident re-renders its report.

A report is built once, at the end of a heal, from the evidence of that run. What changes later
is the incident's bookkeeping: its status (retried, rejected, reopened), its events (a
recurrence), the pull request, the outcome after merge. `refresh_report` writes those into the
report already on disk (Markdown, JSON and HTML, atomically); the rest of it stays as the run
wrote it.
"""

from __future__ import annotations

from pathlib import Path

from patchit.memory import Memory
from patchit.reports.model import RootCauseReport
from patchit.reports.render import write_report


def refresh_report(memory: Memory, incident_id: str) -> bool:
    """Re-render the incident's report with its current state; False when it has none yet
    (a heal in progress writes it at its end) or the one on disk cannot be read."""
    incident = memory.get_incident(incident_id)
    path = Path(incident.report_json) if incident.report_json else None
    if path is None or not path.is_file():
        return False
    try:
        report = RootCauseReport.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # damaged or from another version: the next heal writes a new one
    latest = memory.latest_event(incident_id)
    latest_commit = latest.commit if latest is not None else None
    update: dict[str, object] = {
        "status": incident.status.value,
        "needs_human": incident.needs_human or report.needs_human,
        "events": incident.events,
        "last_seen_utc": latest.created_utc if latest is not None else None,
        "latest_commit": latest_commit if latest_commit != report.commit else None,
        "outcome": incident.outcome,
        "pull_request": incident.pr_url or report.pull_request,
    }
    if incident.branch or incident.status.value != "fixed":
        update["branch"] = incident.branch
    try:
        write_report(report.model_copy(update=update), path.parent)
    except OSError:
        return False  # a stale report is not worth failing what changed the incident
    return True

"""Webhook notifications: a Slack-compatible JSON message when an incident is fixed,
escalated, failed, needs review or regresses.

Messages go through a bounded queue in the memory (`notifications`): each is sent at once, and a
failed send is retried with exponential backoff on the next flush (the next notification, or
`patchit worker`), up to `max_tries`. Beyond `max_queue` the oldest undelivered are dropped.
The text carries the incident's one-paragraph summary, the pull request link and the commands
to inspect the branch; it passes the redactor and never holds a token.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import httpx

from patchit.config import NotifyConfig
from patchit.evidence.redact import environment_secrets, redact
from patchit.memory import Memory
from patchit.memory.records import Incident

URL_ENV = "PATCHIT_WEBHOOK_URL"
Say = Callable[[str], None]


def incident_kind(incident: Incident) -> str:
    if incident.needs_review:
        return "needs_review"
    return incident.status.value


def message(incident: Incident, kind: str, commands: list[str]) -> dict[str, Any]:
    head = f"patchit: incident {incident.id} {kind.replace('_', ' ')}"
    lines = [head, incident.summary or "(no summary)"]
    if incident.pr_url:
        lines.append(f"pull request: {incident.pr_url}")
    if incident.branch:
        lines.append(f"branch: {incident.branch}")
    lines += [f"`{c}`" for c in commands[:3]]
    if incident.report_md:
        lines.append(f"report: `patchit report {incident.id}`")
    text = redact("\n".join(lines), environment_secrets())
    return {
        "text": text,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        "patchit": {"incident": incident.id, "kind": kind, "status": incident.status.value,
                    "branch": incident.branch, "pull_request": incident.pr_url},
    }  # fmt: skip


def notify(
    incident: Incident, config: NotifyConfig, memory: Memory, commands: list[str], kind: str = ""
) -> None:
    """Queue the message for `incident` (when its kind is wanted) and flush the queue."""
    url = config.webhook_url or os.environ.get(URL_ENV)
    kind = kind or incident_kind(incident)
    if not url or kind not in config.on:
        return
    payload = json.dumps(message(incident, kind, commands))
    memory.enqueue_notification(incident.id, kind, url, payload, config.max_queue)
    flush(memory, config)


def flush(memory: Memory, config: NotifyConfig, now: float | None = None) -> int:
    """Send every due message; returns how many were delivered. Never raises."""
    sent = 0
    now = time.time() if now is None else now
    with httpx.Client(timeout=config.timeout_s) as client:
        for row in memory.due_notifications(now):
            try:
                resp = client.post(row["url"], content=row["payload"],
                                   headers={"Content-Type": "application/json"})  # fmt: skip
                error = "" if resp.status_code < 300 else f"HTTP {resp.status_code}"
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            if not error:
                memory.drop_notification(row["id"])
                sent += 1
                continue
            tries = int(row["tries"]) + 1
            if tries >= config.max_tries:
                memory.drop_notification(row["id"])
            else:
                memory.retry_notification(row["id"], tries, now + 2.0**tries, error)
    return sent

"""Spooling a failed dbt run's failures the moment dbt returns, in dbt's own process.

The `patchit dbt` wrapper hands its dbt child a ticket (`SPOOL_ENV`: the state dir, the
wrapper's owner id, the project, repository, commit and start time). When dbt's invocation
returns with failed nodes, the child turns them into events and spools them, taken by the
wrapper, before it writes its record or exits: the failure is durable a few milliseconds after
dbt's summary line, not after the child's exit and the wrapper's own start of healing (a
second on a busy machine, in which a killed wrapper lost it). The row ids go back in the
record (`spooled`); the wrapper heals the failures and marks the rows done, or, killed, leaves
them to a worker, which takes a dead owner's rows. Where the child could not spool, the
wrapper does (`patchit.worker.dbt_wrapper.spool_failures`).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from patchit.intake.dbt_child_env import SPOOL_ENV


def spool_ticket(
    home: Path,
    owner: str,
    project: Path,
    repo: Path,
    commit: str,
    started: datetime,
    uncommitted: dict[str, Any] | None = None,
) -> str:
    """The ticket (JSON) the wrapper passes its dbt child in `SPOOL_ENV`. `uncommitted`: the
    snapshot of the uncommitted work dbt runs on (`commit` is then the snapshot's), for the
    events' context (`patchit.intake.worktree_snapshot`)."""
    ticket = {
        "home": str(home),
        "owner": owner,
        "project": str(project),
        "repo": str(repo),
        "commit": commit,
        "started": started.isoformat(),
    }
    if uncommitted is not None:
        ticket["uncommitted"] = json.dumps(uncommitted)
    return json.dumps(ticket)


def take_ticket() -> dict[str, str] | None:
    """The ticket of this process (taken out of the environment dbt and its children see)."""
    raw = os.environ.pop(SPOOL_ENV, None)
    try:
        ticket = json.loads(raw) if raw else None
    except ValueError:
        return None
    keys = ("home", "owner", "project", "repo", "commit", "started")
    if not isinstance(ticket, dict) or not all(isinstance(ticket.get(k), str) for k in keys):
        return None
    optional = ("uncommitted",)
    return {k: ticket[k] for k in (*keys, *optional) if isinstance(ticket.get(k), str)}


def spool_record(ticket: dict[str, str], record: dict[str, Any], args: list[str]) -> list[int]:
    """Spool the failed nodes of `record` (the child's record of this invocation), taken by
    the ticket's owner; their row ids ([] when none failed, or when the spool could not be
    written and the events went to its fallback file, pending)."""
    from patchit.intake.dbt import events_from_run
    from patchit.intake.spool import spool_taken

    uncommitted = json.loads(ticket["uncommitted"]) if "uncommitted" in ticket else None
    events = events_from_run(
        record, args, Path(ticket["project"]), Path(ticket["repo"]), ticket["commit"],
        datetime.fromisoformat(ticket["started"]), uncommitted,
    )  # fmt: skip
    if not events:
        return []
    payloads = [e.model_dump(mode="json") for e in events]
    return spool_taken(payloads, Path(ticket["home"]), ticket["owner"]) or []

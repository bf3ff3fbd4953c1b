"""What runs that died left behind, cleared at the start of every run (`patchit heal`,
`patchit dbt`, the worker).

A heal takes its incident's lease before it creates anything under `$PATCHIT_HOME/worktrees`
or `sandboxes` (every entry there is named after the incident, but the dbt harness's private
parse dirs, named after their process: `patchit.sandbox.private_dirs`) and gives it up only after it
removed them. So an entry named after an incident that no live run holds is a leftover of a
run that died. The sweep takes such an incident's lease while it clears it (a run starting on
the incident meanwhile waits its turn instead of losing its fresh worktree), then leaves an
open incident with an expired lease: the next worker, or `patchit heal ID`, resumes it.
Another live run's things are never touched: its lease is unexpired and its owner alive
(`patchit.state.liveness`: pid and process start time on this host).

Each lease the sweep takes over from a run that died (or hung past its lease) counts one crash
of its incident. An incident whose heals died `[worker] max_crashes` times (2 by default) is
what kills them, not bad luck: `give_up_crashed` marks it `failed`, with the crashes in its
report, instead of resuming it again (the worker resumes abandoned incidents before it takes
any new event: one that kills every run would otherwise stop the spool for good). A run that
finishes gives its lease up and the count goes with it; `patchit heal ID` tries once more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from patchit.errors import PatchitError
from patchit.memory import Incident, Memory
from patchit.memory.lifecycle import Trigger
from patchit.reports.build import build_report
from patchit.reports.render import write_report
from patchit.sandbox import private_dirs
from patchit.sandbox.worktree import (
    remove_tree,
    remove_worktree,
    remove_worktrees_under,
    worktree_repo,
)

INCIDENT_ENTRY = re.compile(r"^(\d{8}-[0-9a-f]{6})(?:-|$)")
AREAS = ("worktrees", "sandboxes")
SWEEP_LEASE_S = 600.0


@dataclass
class Sweep:
    """What one sweep cleared, and the open incidents it left for resumption."""

    worktrees: int = 0
    sandboxes: int = 0
    leases: int = 0
    resumable: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the user ("" when there was nothing to clear)."""
        if not (self.worktrees or self.sandboxes or self.leases):
            return ""
        line = (
            f"cleared what stopped runs left: {self.worktrees} worktree(s), "
            f"{self.sandboxes} sandbox dir(s), {self.leases} lease(s)"
        )
        if self.resumable:
            line += f"; open incident(s) to resume: {', '.join(self.resumable)}"
        return line


def sweep_dead_runs(home: Path, memory: Memory, owner: str) -> Sweep:
    """Clear the worktrees, sandbox dirs and leases of runs that died (never a live run's)."""
    # entries first, leases second: an entry made after this listing belongs to a run that
    # took its lease before making it, so the lease check below sees that run alive
    entries: dict[str, list[Path]] = {}
    for area in AREAS:
        base = home / area
        for entry in sorted(base.iterdir()) if base.is_dir() else []:
            if match := INCIDENT_ENTRY.match(entry.name):
                entries.setdefault(match[1], []).append(entry)
    sweep = Sweep()
    for kind in private_dirs.ALL:  # the dbt harness's parses of processes killed mid-heal
        sweep.sandboxes += private_dirs.remove_dead(home, kind)
    for incident_id in sorted(set(entries) | set(memory.dead_leases())):
        if memory.lease_is_live(incident_id):
            continue
        had_lease = memory.has_lease(incident_id)
        if not memory.claim_incident(incident_id, owner, ttl_s=SWEEP_LEASE_S, count_crash=True):
            continue  # a live run took it meanwhile
        incident = memory.find_by_id(incident_id)
        try:
            _clear(home, incident, entries.get(incident_id, []), sweep)
        finally:
            if incident is not None and incident.status == "open":
                memory.abandon_incident(incident_id, owner)
                sweep.resumable.append(incident_id)
            else:
                memory.release_incident(incident_id, owner)
        sweep.leases += had_lease
    return sweep


def _clear(home: Path, incident: Incident | None, leftovers: list[Path], sweep: Sweep) -> None:
    repo = Path(incident.repo_path) if incident and incident.repo_path else None
    for path in leftovers:
        owner_repo = worktree_repo(path) or repo
        if path.parent.name == "worktrees" and owner_repo is not None:
            try:
                remove_worktree(owner_repo, path)
            except PatchitError:
                remove_tree(path)  # the repository is gone
            sweep.worktrees += 1
        else:
            remove_tree(path)
            if path.parent.name == "sandboxes":
                sweep.sandboxes += 1
            else:
                sweep.worktrees += 1
    if repo is None or incident is None or not repo.is_dir():
        return
    for area in AREAS:  # git's records of worktrees whose directories are already gone
        try:
            sweep.worktrees += remove_worktrees_under(repo, home / area, incident.id)
        except PatchitError:
            return


def crashed_reason(incident: Incident, crashes: int, memory: Memory) -> str:
    """The report's stop line for an incident whose heals died `crashes` times."""
    attempts = memory.attempts_for(incident.id)
    done = (
        f"{len(attempts)} attempt(s) were recorded first, the last {attempts[-1].outcome}"
        if attempts
        else "no attempt was recorded: it died before any candidate was verified"
    )
    verified = memory.verified_for(incident.id)
    land = "; a verified fix is recorded and lands without a new verification" if verified else ""
    return (
        f"healing it stopped the process healing it {crashes} times (killed, out of memory or "
        f"crashed: it died without finishing); {done}. It is not resumed again: `patchit heal "
        f"{incident.id}` tries once more{land}"
    )


def give_up_crashed(
    home: Path, memory: Memory, incident: Incident, crashes: int, owner: str
) -> bool:
    """Mark an open incident whose heals died `crashes` times `failed`, the crashes in its
    report; False when a live run holds it or it is no longer open."""
    if not memory.claim_incident(incident.id, owner, ttl_s=SWEEP_LEASE_S):
        return False
    try:
        current = memory.get_incident(incident.id)
        if current.status != "open":
            return False
        reason = crashed_reason(current, crashes, memory)
        fields: dict[str, object] = {"summary": reason, "needs_human": True}
        event = memory.latest_event(incident.id)
        if event is not None:
            report = build_report(
                incident=current.model_copy(update={"status": "failed"}),
                event=event,
                evidence=None,
                verdict=None,
                attempts=memory.attempts_for(incident.id),
                winner=None,
                stop_reason=reason,
                commands=[],
                events=current.events,
            )
            try:
                md, js = write_report(report, home / "reports")
                fields |= {"report_md": str(md), "report_json": str(js)}
            except OSError:
                pass  # the summary says it: a full disk must not keep it resumed forever
        memory.transition(incident.id, Trigger.FAILED, **fields)
    finally:
        memory.release_incident(incident.id, owner)  # the crash count goes with the lease
    return True

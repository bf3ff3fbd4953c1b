"""`patchit inspect ID`: the fix in a worktree of its own, re-run against a fresh copy of the
warehouse, its outputs compared with the last good ones. Before any pull request, and without
touching the user's checkout (`git switch` would).

The worktree is `$PATCHIT_HOME/inspect/<id>` on the branch `patchit/<id>` (detached at it when
the branch is checked out elsewhere), so the engineer can read it, run dbt or Airflow in it,
and commit on top. Re-running goes through the same harness and data check as the loop:
nothing runs in, or writes to, the user's repository or database. `--clean` removes it all.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from patchit.errors import BadInputError, PatchitError
from patchit.events.model import UniversalFailureEvent
from patchit.fidelity.check import check_candidate
from patchit.fidelity.model import DataCheck
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.registry import select_harness
from patchit.loop.context import Context
from patchit.memory import Incident
from patchit.sandbox.dbt_profile import resolve_dbt_target, sandbox_db_location
from patchit.sandbox.git import run_git
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import remove_worktree


@dataclass
class Inspection:
    incident: Incident
    path: Path
    created: bool
    detached: bool = False
    verification: Verification | None = None
    check: DataCheck | None = None
    warehouse: Path | None = None  # dbt: the database copy the re-run built, to query

    @property
    def ok(self) -> bool:
        """The re-run passed and the outputs are as meant (or it was not asked for)."""
        if self.verification is None:
            return True
        return self.verification.passed and not (self.check and self.check.needs_review)


def inspect_dir(home: Path, incident_id: str) -> Path:
    return home / "inspect" / incident_id


def open_inspection(incident_id: str, ctx: Context, rerun: bool = True) -> Inspection:
    """Create (or reuse) the incident's inspection worktree; with `rerun`, run the fixed unit
    there and compare its outputs with the last good commit's."""
    incident, repo = _inspectable(incident_id, ctx)
    path = inspect_dir(ctx.home, incident.id)
    created, detached = _worktree(repo, path, incident.branch or "")
    inspection = Inspection(incident, path, created, detached)
    if rerun:
        event = ctx.memory.latest_event(incident.id)
        if event is None:
            raise BadInputError(f"incident {incident.id}: no event is recorded to re-run")
        inspection.verification, inspection.check = _rerun(incident, event, repo, path, ctx)
        inspection.warehouse = _warehouse_copy(event, repo, path)
    return inspection


def close_inspection(incident_id: str, ctx: Context) -> bool:
    """Remove the inspection worktree and its scratch; False if there was none."""
    incident = ctx.memory.get_incident(incident_id)
    path = inspect_dir(ctx.home, incident.id)
    scratch = _scratch(ctx.home, incident.id)
    found = path.exists() or scratch.exists()
    if incident.repo_path and Path(incident.repo_path).is_dir():
        remove_worktree(Path(incident.repo_path), path)
    shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return found


def _inspectable(incident_id: str, ctx: Context) -> tuple[Incident, Path]:
    incident = ctx.memory.get_incident(incident_id)
    if not incident.branch:
        raise BadInputError(
            f"incident {incident.id} is {incident.status.value} with no branch: there is no "
            f"fix to inspect (`patchit report {incident.id}` says why)"
        )
    repo = Path(incident.repo_path or "")
    if not incident.repo_path or not (repo / ".git").exists():
        raise BadInputError(
            f"incident {incident.id}: its repository {incident.repo_path} is gone or not a git "
            "repository"
        )
    ref = f"refs/heads/{incident.branch}"
    if not run_git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).strip():
        raise BadInputError(
            f"incident {incident.id}: branch {incident.branch} no longer exists in {repo}"
        )
    return incident, repo


def _worktree(repo: Path, path: Path, branch: str) -> tuple[bool, bool]:
    """(created, detached): the branch checked out at `path`, or detached at it when another
    worktree (the user's own checkout, say) has it."""
    if (path / ".git").exists():
        return False, not run_git(path, "symbolic-ref", "-q", "HEAD", check=False).strip()
    if path.exists():
        raise BadInputError(f"{path} exists and is not a worktree: remove it, then inspect again")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        run_git(repo, "worktree", "add", "--quiet", str(path), branch)
        return True, False
    except PatchitError:
        shutil.rmtree(path, ignore_errors=True)
        run_git(repo, "worktree", "add", "--quiet", "--detach", str(path), branch)
        return True, True


def _scratch(home: Path, incident_id: str) -> Path:
    return home / "sandboxes" / f"inspect-{incident_id}"


def _rerun(
    incident: Incident, event: UniversalFailureEvent, repo: Path, path: Path, ctx: Context
) -> tuple[Verification, DataCheck | None]:
    ctx = ctx.judged_by(event)  # the sandbox settings the heal had
    scratch = _scratch(ctx.home, incident.id)
    shutil.rmtree(scratch, ignore_errors=True)  # a fresh copy of the warehouse every time
    scratch.mkdir(parents=True)
    snapshot = None
    if event.dbt is not None:
        target = resolve_dbt_target(event)
        if target.db_path is not None and target.db_path.is_file():
            ctx.say(f"copying the warehouse {target.db_path}")
            snapshot = snapshot_database(target.db_path, scratch / "snapshot")
    harness = select_harness(event, repo, ctx.harnesses, config=ctx.config.sandbox)
    workspace = Workspace(root=path, scratch=scratch / "run",
                          snapshot=snapshot.parent if snapshot else None)  # fmt: skip
    workspace.scratch.mkdir()
    ctx.say(f"re-running {event.unit_id} on {incident.branch} with the {harness.name} harness")
    result = harness.verify(workspace, event)
    if not result.passed:
        return result, None
    ctx.say("comparing its outputs with the last good commit's")
    check = check_candidate(
        event, None, repo, harness, workspace, result,
        baseline_commit=ctx.last_good(event), work=scratch / "baseline",
    )  # fmt: skip
    return result, check


def _warehouse_copy(event: UniversalFailureEvent, repo: Path, path: Path) -> Path | None:
    """Where the re-run left its DuckDB copy (inside the worktree), if it did."""
    if event.dbt is None:
        return None
    try:
        target = resolve_dbt_target(event)
        if target.db_path is None:
            return None
        cwd = path / Path(event.dbt.cwd).resolve().relative_to(repo.resolve())
        copy, _ = sandbox_db_location(target, cwd, path)
    except (PatchitError, ValueError):
        return None
    return copy if copy.is_file() else None


def describe(inspection: Inspection) -> list[str]:
    """What `patchit inspect` prints, line by line."""
    incident, path = inspection.incident, inspection.path
    how = "detached at" if inspection.detached else "on"
    lines = [f"worktree: {path} ({how} {incident.branch})"]
    result = inspection.verification
    if result is not None:
        verdict = "passed" if result.passed else "FAILED"
        lines.append(f"re-run: {result.command}: {verdict}")
        lines.append(f"fidelity: harness {result.harness}, isolation {result.isolation}")
        if not result.passed:
            lines += ["", *result.output.splitlines()[-20:]]
    check = inspection.check
    if check is not None:
        lines.append(f"data check: {check.summary}")
        if check.baseline_commit:
            lines.append(f"baseline: {check.baseline_commit[:12]} ({check.baseline_source})")
        if check.outputs:
            lines += ["", "output | verdict | rows (baseline -> fix) | differs in"]
            for out in check.outputs:
                rows = f"{out.rows_baseline} -> {out.rows_candidate}"
                differs = "missing in " + out.missing_in if out.missing_in else ""
                differs = differs or ", ".join(out.differing + out.schema_changes) or "-"
                lines.append(f"{out.name} | {out.verdict} | {rows} | {differs}")
            for out in check.outputs:
                if out.sample and out.verdict != "same":
                    lines += ["", f"differing rows in {out.name}:", *out.sample.splitlines()]
    if inspection.warehouse is not None:
        lines += ["", f"the re-run's warehouse copy (query it freely): {inspection.warehouse}"]
    lines += ["", f"remove it with: patchit inspect {incident.id} --clean"]
    return lines

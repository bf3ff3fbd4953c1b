"""Outcome tracking (`patchit track`): what became of each landed fix after it was merged.

A fix is merged when its commit, or a commit with the same patch (a squash or a cherry-pick:
`git cherry`), is reachable from the base branch. Runs of the repository's units are recorded
by the dbt wrapper (each node's result). Among the runs at commits that contain the fix:
- the incident's own failure again: `no_effect` if the unit never passed with the fix,
  `regression` if it passed with the fix first (the failure came back); either reopens it;
- at the first commit with the fix that ran, a failure never seen at commits without it ->
  `regression` (the fix broke something), and the incident is reopened with a link to the fix;
  only when that commit changes nothing but the fix's own files since the fix (later new
  failures, and those of a run that brought other changes too, have other causes as likely,
  and get their own incidents);
- else the unit passed -> `fixed`; no run yet, or not merged -> `pending`.

Airflow runs are read from the Airflow API server first (`airflow_runs`), when one is
configured (`[airflow] api_url` in `$PATCHIT_HOME/patchit.toml`, or `PATCHIT_AIRFLOW_API_URL`:
the operator's, never a repository's).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

from patchit.config import PatchitConfig
from patchit.delivery.airflow_runs import AirflowApi, record_airflow_runs, unit_key
from patchit.errors import PatchitError
from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory
from patchit.memory.lifecycle import Trigger
from patchit.memory.outcomes import Outcome, UnitRun
from patchit.memory.records import Incident, IncidentStatus
from patchit.policy.settings import incident_settings
from patchit.reports.refresh import refresh_report
from patchit.sandbox.git import is_ancestor, run_git
from patchit.state.home import resolve_home

Say = Callable[[str], None]
TRACKED = (None, "pending", "fixed")


URL_ENV = "PATCHIT_AIRFLOW_API_URL"
NO_API = (
    f"set [airflow] api_url in $PATCHIT_HOME/patchit.toml (or {URL_ENV}) so patchit reads the "
    "DAG's runs"
)


def track(
    memory: Memory,
    say: Say = lambda _m: None,
    airflow_api: str | None = None,
    home: Path | None = None,
) -> list[Outcome]:
    """One pass over every landed fix not yet judged for good; returns the outcomes.
    `airflow_api` overrides the configured Airflow API server; `home` holds the operator's
    settings (default: `resolve_home()`)."""
    home = home or resolve_home()
    found = []
    apis: dict[str, AirflowApi] = {}
    try:
        for incident in memory.list_incidents():
            if incident.status is not IncidentStatus.FIXED or not incident.branch:
                continue
            if incident.outcome not in TRACKED or not incident.repo_path:
                continue
            try:
                repo = Path(incident.repo_path)
                events = memory.events_for(incident.id)
                if not events:  # an older patchit could leave an incident without one
                    say(f"incident {incident.id}: cannot track (no event is recorded for it); "
                        "skipped")  # fmt: skip
                    continue
                event = events[0]
                config = incident_settings(home, memory, incident.id).config
                base = _base(repo, config)
                blind = not read_airflow_runs(event, config, base, incident, memory, apis,
                                              airflow_api)  # fmt: skip
                outcome = judge(incident, memory, event, base)
                if blind and outcome.outcome == "pending" and outcome.merged_into:
                    outcome = replace(outcome, detail=f"{outcome.detail}; {NO_API}")
            except (PatchitError, ValueError) as exc:  # ValueError: an event stored unreadable
                first = (str(exc).splitlines() or [type(exc).__name__])[0]
                say(f"incident {incident.id}: cannot track ({first})")
                continue
            found.append(_settle(incident, outcome, memory, say))
    finally:
        for api in apis.values():
            api.close()
    return found


def _settle(incident: Incident, outcome: Outcome, memory: Memory, say: Say) -> Outcome:
    memory.record_outcome(outcome)
    if outcome.outcome in ("no_effect", "regression"):
        _reopen(incident, outcome, memory)
    refresh_report(memory, incident.id)
    say(f"incident {incident.id}: {outcome.outcome} ({outcome.detail})")
    return outcome


def read_airflow_runs(
    event: UniversalFailureEvent, config: PatchitConfig, base: str, incident: Incident,
    memory: Memory, apis: dict[str, AirflowApi], override: str | None,
) -> bool:  # fmt: skip
    """Record the incident's DAG's runs from the Airflow API server, if one is configured;
    False for an Airflow incident with none."""
    if event.source.value != "airflow":
        return True
    airflow = config.airflow
    url = override or airflow.api_url or os.environ.get(URL_ENV)
    if not url:
        return False
    if url not in apis:
        apis[url] = AirflowApi(url, timeout_s=airflow.timeout_s)
    record_airflow_runs(event, memory, apis[url], base, incident.fingerprint, airflow.deploy_lag_s)
    return True


def judge(incident: Incident, memory: Memory, event: UniversalFailureEvent, base: str) -> Outcome:
    repo = Path(incident.repo_path or "")
    branch = incident.branch or ""
    fix = _rev(repo, f"refs/heads/{branch}")
    if fix is None:
        raise PatchitError(f"branch {branch} no longer exists in {repo}")
    tip = _rev(repo, f"refs/heads/{base}")

    @cache
    def has_fix(commit: str) -> bool:
        return _contains(repo, commit, fix)

    def result(outcome: str, seen: str, detail: str) -> Outcome:
        merged = base if tip and has_fix(tip) else ""
        return Outcome(incident.id, outcome, fix, merged, seen, detail)

    if tip is None or not has_fix(tip):
        return result("pending", "", f"not merged into {base}")
    runs = [r for r in memory.unit_runs(str(repo)) if _known(repo, r.commit)]
    before = {r.fingerprint for r in runs if not r.passed and not has_fix(r.commit)}
    after = [r for r in runs if has_fix(r.commit)]
    unit = unit_key(event)
    again = [r for r in after if not r.passed and r.fingerprint == incident.fingerprint]
    if again:
        held = any(r.passed and r.unit_id == unit for r in after[: after.index(again[-1])])
        if held:  # it passed with the fix, then failed the same way: the failure came back
            return result("regression", again[-1].commit, f"{_unit(again[-1])} failed again")
        return result("no_effect", again[-1].commit, f"{_unit(again[-1])} failed the same way")
    first = after[0].commit if after else ""  # the first run with the fix: only it blames it
    new = [r for r in after if r.commit == first and not r.passed and r.fingerprint not in before]
    if new and _only_the_fix(repo, fix, first):
        return result("regression", new[-1].commit, f"{_unit(new[-1])} fails since the fix")
    passed = [r for r in after if r.passed and r.unit_id == unit]
    if passed:
        return result("fixed", passed[-1].commit, f"{unit} passed at {passed[-1].commit[:12]}")
    return result("pending", "", f"merged into {base}; no run of {unit} with the fix yet")


def _only_the_fix(repo: Path, fix: str, commit: str) -> bool:
    """Whether `commit` differs from the fix in none but the fix's own files: then a new
    failure there can only be the fix's. A run that also brings other changes (more commits,
    new seed data, main's work in the merge) does not blame the fix: such a failure gets an
    incident of its own."""
    fixed = set(run_git(repo, "diff", "--name-only", f"{fix}~1", fix, check=False).split())
    since = set(run_git(repo, "diff", "--name-only", fix, commit, check=False).split())
    return since <= fixed


def _reopen(incident: Incident, outcome: Outcome, memory: Memory) -> None:
    note = (
        f"reopened: the merged fix {outcome.fix_commit[:12]} ({incident.branch}) had "
        f"{outcome.outcome.replace('_', ' ')}: {outcome.detail}"
    )
    memory.transition(incident.id, Trigger.REOPENED, needs_human=True, summary=note)


def _unit(run: UnitRun) -> str:
    return f"{run.unit_id} at {run.commit[:12]}"


def _rev(repo: Path, ref: str) -> str | None:
    out = run_git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return out.strip() or None


def _known(repo: Path, commit: str) -> bool:
    return bool(commit) and _rev(repo, commit) is not None


def _contains(repo: Path, commit: str, fix: str) -> bool:
    """Whether `commit` holds the fix: the fix is its ancestor, or the same patch is."""
    if is_ancestor(repo, fix, commit):
        return True
    cherry = run_git(repo, "cherry", commit, fix, f"{fix}~1", check=False)
    return any(line.startswith("-") for line in cherry.splitlines())


def _base(repo: Path, config: PatchitConfig) -> str:
    configured = config.delivery.base
    if configured:
        return configured
    head = run_git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).strip()
    return head or "main"

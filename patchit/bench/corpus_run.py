"""Run one scenario end to end, the way a user would, and collect what can be seen outside.

Three fresh git repositories per scenario, all from the same base project with fixed commit
dates (so equal content gives equal shas): `good` (the good commit, run once for the hidden
check's expected value), `reference` (for dbt, the good commit built as yesterday's job, then
the broken commit run plainly: the state a user's tree and database are in after a failed
run without patchit) and `user` (the same history through patchit, with its own
`PATCHIT_HOME`). Each fixed incident's branch is then checked
out in a fresh worktree, run from scratch, its hidden check compared with the good one and its
`keeps` (what the change meant, which a revert loses) read.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from patchit.bench.corpus_base import base_project, crlf_lost
from patchit.bench.corpus_env import (
    Proc,
    commit_all,
    copy_project,
    git,
    incidents,
    report_json,
    tree_state,
)
from patchit.bench.corpus_keeps import keeps_missing
from patchit.bench.corpus_model import Scenario, apply_edits
from patchit.bench.corpus_runtimes import BenchRuntime
from patchit.bench.corpus_wh import SchemaBench


@dataclass
class BranchCheck:
    """One fixed incident's branch, run from scratch in a fresh worktree."""

    incident_id: str
    branch: str
    value: Any
    run_ok: bool
    files: list[str]
    output_tail: str = ""
    keeps_missing: list[str] = field(default_factory=list)  # intents the branch undid
    crlf_lost: list[str] = field(default_factory=list)  # the scenario's CRLF files it rewrote


@dataclass
class Observation:
    """Everything the judge needs, gathered from the outside of patchit."""

    scenario: Scenario
    good_value: Any = None
    good_ok: bool = False
    broken_fails: bool = False
    plain_tail: str = ""
    incidents: list[dict[str, Any]] = field(default_factory=list)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    branches: list[BranchCheck] = field(default_factory=list)
    user_state: dict[str, Any] = field(default_factory=dict)
    reference_state: dict[str, Any] = field(default_factory=dict)
    patchit_wall_s: float = 0.0
    patchit_tail: str = ""
    error: str | None = None
    keeps_not_in_change: list[str] = field(default_factory=list)  # a corpus error


def make_repo(src: Path, dest: Path, scenario: Scenario | None) -> str:
    """A git repo of the base project at `dest`; with a scenario, its breaking commit on top."""
    copy_project(src, dest)
    git(dest, "init", "-q", "-b", "main")
    sha = commit_all(dest, f"{src.name}: base project")
    return sha if scenario is None else break_repo(dest, scenario)


def break_repo(repo: Path, scenario: Scenario) -> str:
    """Commit the scenario's breaking change on top of the good commit."""
    apply_edits(repo, scenario.edits)
    return commit_all(repo, scenario.commit_message)


GoodCache = dict[str, Path]


def good_key(scenario: Scenario) -> str:
    """Scenarios with the same project, environment and DAG share one good run."""
    parts = (scenario.project, scenario.kind == "dbt", sorted(scenario.env.items()),
             scenario.dag_id, scenario.logical_date, scenario.duckdb_path)  # fmt: skip
    return json.dumps(parts, sort_keys=True, default=str)


def run_scenario(
    scenario: Scenario,
    project: Path,
    work: Path,
    airflow_template: Path | None,
    good_cache: GoodCache | None = None,
    shared: SchemaBench | None = None,
) -> Observation:
    """Run `scenario` in `work` (a fresh directory); never raises for a scenario's failure.

    `good_cache` maps a good-run key to a good checkout already run (kept by the caller
    for the whole corpus run); without it, the good run happens in `work`. With `shared`, a
    dbt scenario runs on that warehouse (`project` is then the copy its `retarget` made).
    """
    obs = Observation(scenario)
    runtime = BenchRuntime(scenario, work, airflow_template, shared)
    try:
        project = base_project(project, work, scenario)
        _observe(obs, runtime, project, work, {} if good_cache is None else good_cache)
    except Exception as exc:  # one broken scenario must not stop the corpus
        obs.error = f"{type(exc).__name__}: {exc}"
    return obs


def _observe(
    obs: Observation, runtime: BenchRuntime, project: Path, work: Path, good_cache: GoodCache
) -> None:
    scenario = obs.scenario
    reference, user, home = (work / n for n in ("reference", "user", "home"))
    key = good_key(scenario)
    if key not in good_cache:
        good = work / "good"
        make_repo(project, good, None)
        good_proc = runtime.run_from_scratch(good, broken=False)
        good_cache[key] = good
    else:
        good_proc = None
    obs.good_value = runtime.read_check(good_cache[key])
    if obs.good_value is None or isinstance(obs.good_value, str):
        tail = good_proc.tail(600) if good_proc else "(an earlier scenario's good run)"
        obs.error = f"the good commit gave no hidden-check value {obs.good_value!r}: {tail}"
        return
    obs.good_ok = True
    runtime.prepare_home(home)
    make_repo(project, reference, None)
    make_repo(project, user, None)
    with ThreadPoolExecutor(max_workers=1) as pool:  # each reference run beside the user's
        history = pool.submit(runtime.history_run, reference, None)
        runtime.history_run(user, home)
        history.result()
        break_repo(reference, scenario)
        break_repo(user, scenario)
        text_keeps = [k for k in scenario.keeps if k.sql is None]
        obs.keeps_not_in_change = keeps_missing(text_keeps, reference, None)
        plain_future = pool.submit(runtime.plain_run, reference)
        procs = runtime.patchit_run(user, home)
        plain = plain_future.result()
    obs.broken_fails = plain.code != 0
    obs.plain_tail = plain.tail(800)
    obs.reference_state = tree_state(
        reference, runtime.user_data(reference), runtime.data_hash(reference)
    )
    obs.patchit_wall_s = sum(p.wall_s for p in procs)
    obs.patchit_tail = "\n".join(_describe(p) for p in procs)
    obs.user_state = tree_state(
        user, runtime.user_data(user), runtime.data_hash(user)
    )  # before any worktree of ours
    mine = str(user.resolve())
    obs.incidents = [i for i in incidents(home, work) if i.get("repo_path") == mine]
    for incident in obs.incidents:
        incident_id = str(incident["id"])
        obs.reports[incident_id] = report_json(home, incident_id, work)
        if incident.get("status") == "fixed" and incident.get("branch"):
            obs.branches.append(_check_branch(runtime, user, str(incident["branch"]),
                                              incident_id, work))  # fmt: skip


def _state(runtime: BenchRuntime, repo: Path) -> dict[str, object]:
    return tree_state(repo, runtime.user_data(repo), runtime.data_hash(repo))


def _check_branch(
    runtime: BenchRuntime, repo: Path, branch: str, incident_id: str, work: Path
) -> BranchCheck:
    tree = work / f"branch-{incident_id}"
    git(repo, "worktree", "add", "-q", str(tree), branch)
    try:
        files = git(repo, "diff", "--name-only", f"{branch}~1", branch).splitlines()
        lost = crlf_lost(tree, runtime.scenario.crlf, repo)  # byte for byte, before any run
        proc = runtime.run_from_scratch(tree, broken=True)
        value = runtime.read_check(tree)
        query = (lambda sql: runtime.query(tree, sql)) if runtime.scenario.kind == "dbt" else None
        missing = keeps_missing(runtime.scenario.keeps, tree, query)
        return BranchCheck(incident_id, branch, value, proc.code == 0, files, proc.tail(800),
                           missing, lost)  # fmt: skip
    finally:
        git(repo, "worktree", "remove", "--force", str(tree))
        git(repo, "worktree", "prune")
        shutil.rmtree(tree, ignore_errors=True)


def _describe(proc: Proc) -> str:
    name = " ".join(Path(proc.cmd[0]).name.split() + proc.cmd[1:4])
    return f"$ {name} -> exit {proc.code} in {proc.wall_s:.1f} s\n{proc.tail(1200)}"


def time_to_final_s(incident: dict[str, Any]) -> float | None:
    """From the incident's intake (the failure) to its final state, by patchit's clock."""
    try:
        created = datetime.fromisoformat(str(incident["created_utc"]))
        updated = datetime.fromisoformat(str(incident["updated_utc"]))
    except (KeyError, ValueError):
        return None
    return max(0.0, (updated - created).total_seconds())

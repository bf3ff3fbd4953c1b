"""The baseline a candidate is compared with: a known good commit, run by the same harness.

Choice: the project's last good commit from memory (the commit of its last green run), else
the failing commit's parent; each must build green here, on a copy of the same snapshot as the
candidate, or it is no baseline. The runs happen in a worktree under `work` (never the user's
checkout) and are kept there, described by `work/baseline.json`, so every candidate of an
incident is compared with the same baseline runs: the first run, and a second one (made only
when a candidate differs) that tells which outputs are unstable.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.errors import PatchitError, VcsError
from patchit.events.model import UniversalFailureEvent
from patchit.fidelity.dbt_data import precompute_stats
from patchit.fidelity.outputs import dbt_outputs, pg_output_of
from patchit.harnesses.base import Harness, Verification, Workspace
from patchit.harnesses.dbt.slice import SLICE_OF
from patchit.sandbox.git import QUERY_TIMEOUT_S, exists_at, run_git
from patchit.sandbox.worktree import create_worktree, remove_worktree

STATE_FILE = "baseline.json"
FROM_MEMORY = "last good commit (memory)"
FROM_PARENT = "parent of the failing commit"


@dataclass
class Baseline:
    """A chosen baseline commit and its runs (each a Verification whose `outputs` point at
    what the run left under `work`)."""

    commit: str
    source: str
    runs: list[Verification]


def _resolve(repo: Path, rev: str) -> str | None:
    try:
        query = ("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return run_git(repo, *query, timeout_s=QUERY_TIMEOUT_S).strip()
    except VcsError:
        return None


def choices(repo: Path, failing: str, remembered: str | None) -> list[tuple[str, str]]:
    """(commit, source) to try in order: memory's last good, then the failing commit's parent."""
    failing_sha = _resolve(repo, failing)
    found: list[tuple[str, str]] = []
    if remembered and (sha := _resolve(repo, remembered)) and sha != failing_sha:
        found.append((sha, FROM_MEMORY))
    parent = _resolve(repo, f"{failing}^1")
    if parent and parent not in [c for c, _ in found]:
        found.append((parent, FROM_PARENT))
    return found


class BaselineRunner:
    """Builds (once per incident) and remembers the baseline runs under `work`."""

    def __init__(
        self,
        event: UniversalFailureEvent,
        repo: Path,
        harness: Harness,
        snapshot: Path | None,
        work: Path,
    ) -> None:
        self.event, self.repo, self.harness = event, repo, harness
        self.snapshot, self.work = snapshot, work
        self.state_path = work / STATE_FILE
        self._prepared: str | None = None  # the commit `prepare_tree` checked out

    def _load(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data

    def _save(self, state: dict[str, Any]) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.state_path.write_text(json.dumps(state, indent=1), encoding="utf-8")

    def first(self, remembered: str | None) -> tuple[Baseline | None, str]:
        """The baseline with one green run, or (None, why there is none)."""
        state = self._load()
        if state.get("commit") and self._outputs_exist(state):
            return self._from_state(state), ""
        if "none" in state:
            return None, str(state["none"])
        failing = self.event.commit or "HEAD"
        tried: list[str] = []
        for commit, source in choices(self.repo, failing, remembered):
            run = self._run(commit, 1)
            if run.passed:
                self._save({"commit": commit, "source": source, "runs": [run.model_dump()]})
                return Baseline(commit, source, [run]), ""
            tried.append(f"{source} {commit[:12]} {self._not_green(commit, run)}")
        reason = "; ".join(tried) or f"the failing commit {failing[:12]} has no parent"
        self._save({"none": reason})
        return None, reason

    def _not_green(self, commit: str, run: Verification) -> str:
        """Why `commit` gave no baseline: the failing unit's file did not exist yet there (a
        model the change added has nothing to compare with), else how its build failed."""
        path = self.event.unit_path
        try:
            added = bool(path) and not exists_at(self.repo, commit, str(path))
        except VcsError:
            added = False
        if added:
            return f"has no {path} (the change added it): nothing to compare with"
        return f"did not build green ({_why(run)})"

    def second(self, baseline: Baseline) -> Verification:
        """A second run of the baseline (made once), to tell unstable outputs apart."""
        if len(baseline.runs) >= 2:
            return baseline.runs[1]
        run = self._run(baseline.commit, 2)
        baseline.runs.append(run)
        state = self._load()
        state["runs"] = [r.model_dump() for r in baseline.runs]
        self._save(state)
        return run

    def _outputs_exist(self, state: dict[str, Any]) -> bool:
        """Whether the remembered runs' outputs are still there: a Postgres sandbox schema
        lives only as long as the harness that built it (a later heal builds it again)."""
        outputs = [r.get("outputs") or {} for r in state.get("runs", [])]
        if any(o.get("sf_schema") for o in outputs):
            built = [o for o in outputs if o.get("sf_schema")]
            if len({str(o.get("sf_database") or "") for o in built}) != 1:
                return False  # not one database to compare in
            return self._sf_schemas_exist([str(o["sf_schema"]) for o in built],
                                          str(built[0].get("sf_database") or ""))  # fmt: skip
        schemas = [str(o["pg_schema"]) for o in outputs if o.get("pg_schema")]
        if not schemas:
            return True
        built = [o for o in outputs if o.get("pg_schema")]
        if len({str(o.get("pg_dbname") or "") for o in built}) != 1:
            return False  # not one database to compare in
        try:
            from patchit.sandbox.postgres import PgWarehouse

            # patchit's copy lives only while the incident lasts
            warehouse = PgWarehouse(pg_output_of(self.event, built[0]))
            try:
                return warehouse.schemas_exist(schemas)
            finally:
                warehouse.close()
        except PatchitError:
            return False

    def _sf_schemas_exist(self, schemas: list[str], database: str = "") -> bool:
        """Whether a Snowflake run's sandbox schemas are still there (see _outputs_exist)."""
        try:
            from patchit.sandbox.dbt_profile import resolve_dbt_target
            from patchit.sandbox.snowflake import SfWarehouse

            output = resolve_dbt_target(self.event).output
            if database:  # patchit's own clone lives only while the incident lasts
                output = {**output, "database": database}
            warehouse = SfWarehouse(output)
            try:
                return all(warehouse.label(schema) is not None for schema in schemas)
            finally:
                warehouse.close()
        except PatchitError:
            return False

    def _from_state(self, state: dict[str, Any]) -> Baseline:
        runs = [Verification.model_validate(r) for r in state.get("runs", [])]
        return Baseline(str(state["commit"]), str(state.get("source", "")), runs)

    def prepare_tree(self, remembered: str | None) -> None:
        """Make the worktree of the commit `first` would try first, for its first run; nothing
        when the baseline is already chosen or known to be impossible."""
        state = self._load()
        if state.get("commit") or "none" in state:
            return
        found = choices(self.repo, self.event.commit or "HEAD", remembered)
        if found:
            tree = self._tree()
            remove_worktree(self.repo, tree)
            self._prepared = found[0][0]  # set first: a half-made tree is discarded too
            create_worktree(self.repo, found[0][0], tree)

    def discard_tree(self) -> None:
        """Remove the worktree `prepare_tree` made, unless a run used (and removed) it."""
        if self._prepared is not None:
            self._prepared = None
            remove_worktree(self.repo, self._tree())

    def _tree(self) -> Path:
        return self.work / "tree"  # one path for every run: dbt's partial parse stays valid

    def _run(self, commit: str, number: int) -> Verification:
        """One harness run of `commit`; its outputs are moved out of the worktree into
        `work/run-<n>` before the worktree goes."""
        scratch = self.work / f"run-{number}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        tree = self._tree()
        prepared, self._prepared = self._prepared, None
        if prepared == commit and tree.is_dir():
            root = tree.resolve()  # made by prepare_tree, untouched since
        else:
            remove_worktree(self.repo, tree)
            root = create_worktree(self.repo, commit, tree)
        try:
            workspace = Workspace(root=root, scratch=scratch, snapshot=self.snapshot)
            try:
                result = self.harness.verify(workspace, self.event)
            except PatchitError as exc:
                return Verification(passed=False, harness=self.harness.name, command="",
                                    output=str(exc))  # fmt: skip
            if not result.passed:
                return result
            return result.model_copy(update={"outputs": self._keep(workspace, result)})
        finally:
            remove_worktree(self.repo, root)

    def _keep(self, workspace: Workspace, result: Verification) -> dict[str, str]:
        if self.event.dbt is not None and self.harness.name == "dbt":
            kept = dbt_outputs(workspace, self.event, result, keep=workspace.scratch / "outputs")
            target = str(workspace.scratch / "target")
            if kept.sf_output is not None and kept.pg_schema is not None:
                own = {k: v for k, v in result.outputs.items() if k == "sf_database"}
                return {"sf_schema": kept.pg_schema, "target": target, **own}
            if kept.pg_schema is not None:  # in the database, not in the worktree
                where = {k: v for k, v in result.outputs.items() if k == "pg_dbname"}
                return {"pg_schema": kept.pg_schema, "target": target, **where}
            assert kept.duckdb is not None
            # read now: built ahead, this overlaps the first candidate's verification
            precompute_stats(kept.duckdb, [(n.schema, n.name) for n in kept.nodes.values()])
            # a run on a slice of the warehouse: the check fills in from the snapshot what a
            # candidate built and this run did not (else "missing in baseline")
            sliced = {k: v for k, v in result.outputs.items() if k == SLICE_OF}
            return {"duckdb": str(kept.duckdb), "target": target, **sliced}
        return {"result": str(workspace.scratch / "airflow_result.json")}


def _why(run: Verification) -> str:
    if run.failures:
        return "failing: " + ", ".join(run.failures[:3])
    last = run.output.strip().splitlines()[-1:] if run.output.strip() else []
    return last[0][:200] if last else "no result"

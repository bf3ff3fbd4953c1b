"""The Airflow harness (local): the DAG import check, then the failed task, the other failed
tasks of its incident and their upstream tasks, in one run in the worktree, with an isolated
AIRFLOW_HOME: a candidate passes only when every failed task of the incident passes.

Each candidate gets `<scratch>/airflow-home` holding a copy of a pre-migrated template
metadata DB (`home`), an environment scrubbed of the user's Airflow settings, and
`dags_folder`/`PYTHONPATH` mapped into the worktree. The run itself
(`runner.run_request`) parses the DAG file, runs `dag.test()` on the failed tasks and
their upstream tasks (so the XComs they pull exist) with retries 0 and patchit's callback off,
and judges from the task instances' final states, never from an exit code.

`warm=True` (default) serves every candidate from one pre-imported parent that forks a child
per candidate (`fork`): no DagBag or user module survives between candidates.
`warm=False` starts `python -m patchit.harnesses.airflow.runner` per candidate.

Either runs in the sandbox `self.sandbox` configures (`patchit.sandbox.isolation`): the warm
parent is started inside it with patchit's worktrees, sandboxes and cache writable, and its
forks inherit it; a task stopped by a limit is reported with `limit_hit`, not as a failure.

`screen()` compiles the changed `.py` files and, with the warm parent, imports the DAG file in
a fork of it (an import-only request: no task runs) before the candidate is verified. That
fork runs the candidate's code as verify's does, so it is confined alike (Landlock: its own
worktree and scratch, the private /tmp); where the parent cannot narrow its forks, the import
is left to verify. An import error the sandbox may have caused (a refused write, a limit) is
left to verify too: a screened-out diff is never tried again for its fingerprint.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from patchit.config import PatchitConfig, SandboxConfig
from patchit.errors import HarnessError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.airflow.fork import ForkParent
from patchit.harnesses.airflow.home import airflow_env, prepare_airflow_home
from patchit.harnesses.airflow.runner import PASSING_STATES
from patchit.harnesses.base import Screening, Verification, Workspace
from patchit.harnesses.warm import kill_process_group, popen_sandboxed
from patchit.sandbox.envrefs import referenced_env_names
from patchit.sandbox.isolation import Sandbox, make_sandbox, patchit_areas
from patchit.screen.python import compile_python

OUTPUT_TAIL_LINES = 60
LINE_MAX_CHARS = 400
SCREEN_TIMEOUT_S = 60.0  # a DAG file that takes longer to import is left to verify
IMPORT_CHECK = "the DAG file imported in a fork of the warm Airflow parent"


def _referenced(paths: list[Path], workspace: Workspace) -> set[str]:
    """The variables the code on the run's Python path (inside the worktree) reads: passed to
    the import and the task, with no others beyond the allowlist."""
    return referenced_env_names(p for p in paths if _within(p, workspace.root))


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def repo_relative(path_text: str, repo: Path | None) -> Path:
    """A path the event gives (absolute in the user's repo, or repo-relative) as repo-relative."""
    path = Path(path_text)
    if not path.is_absolute():
        return path
    if repo is None:
        raise HarnessError(f"{path}: absolute path but the event has no repo_path")
    try:
        return path.resolve().relative_to(repo.resolve())
    except ValueError as exc:
        raise HarnessError(f"{path} is outside the repository {repo}") from exc


def locate_dag(workspace: Workspace, event: UniversalFailureEvent) -> tuple[Path, Path]:
    """(DAG file, dags folder), both inside the worktree."""
    repo = Path(event.repo_path) if event.repo_path else None
    dag_text = event.context.get("dag_file") or event.unit_path
    if not dag_text:
        raise HarnessError(f"{event.short()}: an Airflow event needs unit_path or dag_file")
    dag_file = workspace.root / repo_relative(str(dag_text), repo)
    if not dag_file.is_file():
        raise HarnessError(f"{dag_file}: the DAG file is not in the worktree")
    if folder := event.context.get("dags_folder"):
        dags_folder = workspace.root / repo_relative(str(folder), repo)
    else:
        # Helper modules sit at the dags folder's root; a `dags` ancestor is the usual layout.
        dags_folder = next(
            (p for p in dag_file.parents if p.name == "dags" and workspace.root in p.parents),
            dag_file.parent,
        )
    return dag_file, dags_folder


def python_path(
    dags_folder: Path, workspace: Workspace, event: UniversalFailureEvent
) -> list[Path]:
    """The dags folder, then the user's PYTHONPATH with entries in their repo re-rooted into
    the worktree (so helper modules come from the candidate, never from the user's tree)."""
    entries = [dags_folder]
    repo = Path(event.repo_path).resolve() if event.repo_path else None
    for text in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not text:
            continue
        entry = Path(text).resolve()
        if repo is not None and (entry == repo or repo in entry.parents):
            entry = workspace.root / entry.relative_to(repo)
        if entry not in entries:
            entries.append(entry)
    return entries


def summarise_output(result: dict[str, Any], log_path: Path) -> str:
    """The import error, or the log tail with the final task states."""
    if result.get("import_error"):
        return f"DAG import failed:\n{result['import_error']}"
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    tail = [line[:LINE_MAX_CHARS] for line in lines[-OUTPUT_TAIL_LINES:]]
    parts = ["\n".join(tail)]
    if result.get("error"):
        parts.append(str(result["error"]))
    if result.get("states"):
        parts.append("task states: " + json.dumps(result["states"], sort_keys=True))
    return "\n".join(p for p in parts if p).strip()


def incident_tasks(event: UniversalFailureEvent) -> list[str]:
    """The failed task and the other failed tasks of its incident (`related_units`), once each:
    a candidate passes only when all of them pass in one run."""
    related = [str(u) for u in event.context.get("related_units") or []]
    return list(dict.fromkeys([event.unit_id, *related]))


def task_verdicts(result: dict[str, Any], tasks: list[str], passed: bool) -> dict[str, str]:
    """Each task of the incident and how it ended (the runner's `units`); when the run ended
    before any task ran (an import error, a crash), every task is `not run`."""
    found = result.get("units")
    if isinstance(found, dict) and found:
        return {task: str(found.get(task, "not run")) for task in tasks}
    return {task: "success" if passed else "not run" for task in tasks}


class AirflowHarness:
    """Re-runs a failed Airflow task (and its upstream tasks) in the candidate's worktree."""

    name: ClassVar[str] = "airflow"

    def __init__(
        self, timeout_s: float = 600, warm: bool = True, sandbox: SandboxConfig | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.warm = warm
        self.sandbox = sandbox or SandboxConfig()
        self._parent: ForkParent | None = None
        self._parent_config: SandboxConfig | None = None  # the config the parent started with
        self._parent_readable: tuple[Path, ...] = ()  # the extra dirs its sandbox shows
        self._lock = threading.Lock()
        self.last_timings: dict[str, int] = {}  # migrate_ms, copy_ms, run_ms of the last verify

    @property
    def parent_pid(self) -> int | None:
        parent = self._parent
        return parent.pid if parent is not None and parent.alive() else None

    def start(self) -> None:
        """Start the warm parent now (imports Airflow: seconds) rather than on first verify."""
        if self.warm:
            with self._lock:
                self._ensure_parent(())

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        return event.source is FailureSource.AIRFLOW

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        """Changed `.py` files compiled; then, when one of them changed and the harness is
        warm, the DAG file imported in a fork of the warm parent (as verify's first step, but
        no task runs). A broken DAG file's own event is left to verify, whose whole test is
        that import; a cold harness would pay seconds of Airflow imports, so it only compiles."""
        started = time.monotonic()
        compiled = compile_python(workspace.root, changed)
        if not compiled.passed or not compiled.screened:
            return compiled
        if not self.warm or event.status == "import_error":
            why = "cold harness" if not self.warm else "the import is verify's whole test here"
            return compiled.model_copy(
                update={"skipped": [*compiled.skipped, f"DAG import: left to verify ({why})"]}
            )
        imported = self._screen_import(workspace, event)
        return Screening(
            passed=imported.passed,
            check=f"{compiled.check}; {imported.check}",
            screened=[*compiled.screened, *imported.screened],
            skipped=[*compiled.skipped, *imported.skipped],
            reason=imported.reason,
            output=imported.output,
            duration_ms=max(1, int((time.monotonic() - started) * 1000)),
        )

    def _screen_import(self, workspace: Workspace, event: UniversalFailureEvent) -> Screening:
        try:
            dag_file, dags_folder = locate_dag(workspace, event)
            scratch = workspace.scratch.resolve() / "screen"
            (scratch / "home").mkdir(parents=True, exist_ok=True)
            home, db, _ = prepare_airflow_home(scratch)
            paths_in = python_path(dags_folder, workspace, event)
            env = airflow_env(home, db, dags_folder, scratch / "home", paths_in,
                              _referenced(paths_in, workspace))  # fmt: skip
            request = {"dag_file": str(dag_file), "dags_folder": str(dags_folder),
                       "dag_id": event.pipeline_id, "task_id": event.unit_id,
                       "import_only": True}  # fmt: skip
            paths = {k: scratch / f"airflow_{k}.json" for k in ("request", "result")}
            log_path = scratch / "airflow_output.log"
            paths["request"].write_text(json.dumps(request), encoding="utf-8")
            job = {"request": str(paths["request"]), "result": str(paths["result"]),
                   "log": str(log_path), "cwd": str(workspace.root), "env": env}  # fmt: skip
            with self._lock:
                parent = self._ensure_parent((workspace.root, scratch))
                sandbox = parent.sandbox
                if sandbox.confines_writes and not sandbox.narrows:
                    # the fork could write every incident's dirs the parent's sandbox binds
                    return Screening.nothing(
                        "DAG import: left to verify (per-candidate writes not enforced here)",
                        IMPORT_CHECK,
                    )
                if sandbox.narrows:  # as verify's fork: this candidate's dirs only
                    job["writable"] = sandbox.narrowed(workspace.root, scratch)
                timed_out = parent.run(job, min(self.timeout_s, SCREEN_TIMEOUT_S))
        except (HarnessError, OSError) as exc:
            return Screening.nothing(f"DAG import: {exc}", IMPORT_CHECK)
        if timed_out:
            return Screening.nothing(
                f"DAG import: still running after {SCREEN_TIMEOUT_S:g} s", IMPORT_CHECK
            )
        result = self._read_result(paths["result"], False, log_path)
        label = dag_file.relative_to(workspace.root).as_posix()
        error = result.get("import_error")
        if result.get("stage") == "crash" or not error:
            return Screening(check=IMPORT_CHECK, screened=[label])
        if limit := sandbox.limit_in(str(error)):
            # the sandbox, not the candidate, may have failed the import: a screened-out
            # verdict is kept for the fingerprint, so only verify may judge this one
            return Screening.nothing(
                f"DAG import: left to verify (it hit the sandbox's {limit} limit)", IMPORT_CHECK
            )
        last = [line for line in str(error).splitlines() if line.strip()][-1:] or [""]
        return Screening(
            passed=False, check=IMPORT_CHECK, screened=[label],
            reason=f"{label}: {last[0].strip()}", output=f"DAG import failed:\n{error}",
        )  # fmt: skip

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        started = time.monotonic()
        dag_file, dags_folder = locate_dag(workspace, event)
        scratch = workspace.scratch.resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / "home").mkdir(exist_ok=True)
        home, db, migrate_ms = prepare_airflow_home(scratch)
        copied = time.monotonic()
        paths = python_path(dags_folder, workspace, event)
        env = airflow_env(home, db, dags_folder, scratch / "home", paths,
                          _referenced(paths, workspace))  # fmt: skip
        tasks = incident_tasks(event)
        request = {
            "dag_file": str(dag_file),
            "dags_folder": str(dags_folder),
            "dag_id": event.pipeline_id,
            "task_id": event.unit_id,
            "related_task_ids": tasks[1:],
            "map_index": event.map_index
            if event.map_index is not None and event.map_index >= 0
            else None,
            "logical_date": event.logical_date.isoformat() if event.logical_date else None,
            "import_only": event.status == "import_error",
        }
        request_path, result_path = (
            scratch / "airflow_request.json",
            scratch / "airflow_result.json",
        )
        log_path = scratch / "airflow_output.log"
        request_path.write_text(json.dumps(request), encoding="utf-8")
        result_path.unlink(missing_ok=True)
        log_path.unlink(missing_ok=True)
        need = (workspace.root, scratch)
        readable = tuple(p for p in paths if not _within(p, workspace.root))
        with self._lock:
            if self.warm:
                parent = self._ensure_parent(need, readable)
                sandbox = parent.sandbox
                job = {"request": str(request_path), "result": str(result_path),
                       "log": str(log_path), "cwd": str(workspace.root), "env": env}  # fmt: skip
                if sandbox.narrows:  # the fork may write only this candidate's dirs
                    job["writable"] = sandbox.narrowed(workspace.root, scratch)
                timed_out = parent.run(job, self.timeout_s)
            else:
                sandbox = make_sandbox(self.sandbox, need, readable=readable)
                timed_out = self._run_fresh(
                    request_path, result_path, log_path, workspace, env, sandbox
                )
        result = self._read_result(result_path, timed_out, log_path)
        passed = bool(result.get("passed")) and not timed_out
        output = summarise_output(result, log_path)
        limit = "time" if timed_out else None
        if timed_out:
            output = f"{output}\npatchit: the task was stopped after {self.timeout_s:g} s".strip()
        elif not passed:
            error = str(result.get("error") or "") or None  # the task's own, else the log's
            limit = sandbox.limit_in(f"{output}\n{error or ''}", error)
        self.last_timings = {
            "migrate_ms": migrate_ms,
            "copy_ms": int((copied - started) * 1000) - migrate_ms,
            "run_ms": int((time.monotonic() - copied) * 1000),
        }
        units = task_verdicts(result, tasks, passed)
        failures = [t for t, state in units.items() if state not in PASSING_STATES]
        return Verification(
            passed=passed,
            harness=self.name,
            command=self._command(event),
            output=output,
            failures=[] if passed else failures or [event.unit_id],
            units=units,
            duration_ms=int((time.monotonic() - started) * 1000),
            isolation=sandbox.describe(),
            fidelity="runtime",
            limit_hit=limit,
        )

    def configure(self, config: PatchitConfig) -> None:
        """The repo's time limit and sandbox settings (isolation, network, memory)."""
        self.timeout_s = config.loop.harness_timeout_s
        self.sandbox = config.sandbox

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None:
        """Nothing to start ahead of the first verify."""

    def release(self, area: Path) -> None:
        """Nothing outside the filesystem to release."""

    def close(self) -> None:
        with self._lock:
            if self._parent is not None:
                self._parent.stop()
                self._parent = None

    def __enter__(self) -> AirflowHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running --------------------------------------------------------------------------

    @staticmethod
    def _command(event: UniversalFailureEvent) -> str:
        if event.status == "import_error":
            return f"airflow dags list-import-errors  # {event.unit_id} must import cleanly"
        date = event.logical_date.isoformat() if event.logical_date else "now"
        command = shlex.join(["airflow", "dags", "test", event.pipeline_id, date])
        tasks = incident_tasks(event)
        which = " and ".join([", ".join(tasks[:-1]), tasks[-1]] if len(tasks) > 1 else tasks)
        return f"{command}  # only {which} and their upstream tasks, retries 0"

    def _ensure_parent(self, need: tuple[Path, ...], readable: tuple[Path, ...] = ()) -> ForkParent:
        """The live parent if its sandbox lets it write `need` (and read `readable`) under
        the current config; else a new one (the old one is stopped: it died, or its sandbox
        is the wrong one)."""
        parent = self._parent
        if (
            parent is not None
            and parent.alive()
            and self._parent_config == self.sandbox
            and parent.sandbox.covers(*need)
            and set(readable) <= set(self._parent_readable)
        ):
            return parent
        if parent is not None:
            parent.stop()
        self._parent = None
        box = make_sandbox(self.sandbox, patchit_areas(*need), readable=readable, warm=True)
        self._parent = ForkParent.start(box)
        self._parent_readable = readable
        self._parent_config = self.sandbox.model_copy()
        return self._parent

    def _run_fresh(
        self,
        request: Path,
        result: Path,
        log: Path,
        workspace: Workspace,
        env: dict[str, str],
        sandbox: Sandbox,
    ) -> bool:
        """One `python -m patchit.harnesses.airflow.runner` process; True if it timed out."""
        runner = [sys.executable, "-m", "patchit.harnesses.airflow.runner"]
        with log.open("ab") as out:
            proc = popen_sandboxed(
                [*runner, str(request), str(result)], sandbox,
                cwd=workspace.root, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                kill_process_group(proc)
                return True
        return False

    @staticmethod
    def _read_result(path: Path, timed_out: bool, log_path: Path) -> dict[str, Any]:
        try:
            result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return result
        except (OSError, ValueError):
            if timed_out:
                return {"passed": False, "stage": "timeout"}
            # The run died without a result (killed, segfault): that candidate failed.
            return {"passed": False, "stage": "crash", "error": "the Airflow run left no result"}

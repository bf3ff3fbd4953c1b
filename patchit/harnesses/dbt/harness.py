"""The dbt harness: `dbt build --select <node>+` in a worktree against a copy of the database.

On DuckDB the copy is a slice (`slice`): a fresh file holding the relations the selection
reads, cut from the incident snapshot attached read-only, when the failing run's manifest can
tell what those are; else, and for a run that misses a relation anyway, the whole snapshot.

The same run first builds every upstream node of what it builds that the copy has no relation
for: a model the breaking change renamed or added (`stg_invoices.sql` became
`stg_billing_invoices.sql`), which the user's failing run never built. A checkout whose
DuckDB file does not exist yet (a fresh clone whose first run failed at parse time) verifies on
a fresh warehouse, built from the whole upstream (dbt's `@node`).

One warm worker process (`patchit.harnesses.dbt.worker`) serves every verify() call of a
harness, which saves the seconds dbt spends importing itself; `warm=False` runs each call in
a fresh process of its own instead (`worker --once`: the same run, imported anew, nothing kept
between calls). Both produce the same outcome and are judged the same way.

Parsing the project is most of a warm run, so each run is offered a saved parse: the failing
run's, which the worker decodes once (`parses`, `saved_parse`), or the previous
candidate's. The sandbox profile's `path:` is the same string for every candidate (see
`sandbox_db_location`), so dbt accepts it and re-parses only the files the candidate changed;
dbt checks everything else itself.

The worker (or the fresh `dbt`) runs in the sandbox `self.sandbox` configures
(`patchit.sandbox.isolation`); a worker whose sandbox cannot write a workspace is replaced.

Before that, `screen()` binds each changed model's SQL with DuckDB against a schema-only clone
of the incident's warehouse snapshot (`patchit.screen.dbt`, milliseconds): a candidate that
does not bind never reaches dbt.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from patchit.config import PatchitConfig, SandboxConfig
from patchit.errors import HarnessError, PatchitError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.harnesses.base import Screening, Verification, Workspace
from patchit.harnesses.dbt.changes import manifest_node_names, read_failing_parse
from patchit.harnesses.dbt.parses import ParseSeeds
from patchit.harnesses.dbt.pg import (
    PgSchemas,
    admit_built,
    guard_schemas,
    pg_outputs,
    seed_incrementals,
    warehouse_note,
)
from patchit.harnesses.dbt.phases import breakdown_ms
from patchit.harnesses.dbt.preparation import (
    prepare,
    run_env,
    sandbox_paths,
    settle_warehouse,
    start_warehouse,
)
from patchit.harnesses.dbt.prewarm import adopt
from patchit.harnesses.dbt.protocol import RUN_NODES_FILE
from patchit.harnesses.dbt.sf import SfSchemas, clone_incrementals, sf_note, sf_outputs
from patchit.harnesses.dbt.slice import (
    missed_relation,
    release_snapshots,
    slice_outputs,
    snapshot_relations,
)
from patchit.harnesses.dbt.tuning_schemas import SCHEMAS_ENV, SCHEMAS_FILE
from patchit.harnesses.dbt.units import (
    DbtOutcome,
    DbtSandbox,
    incident_units,
    judge_with_known,
    tail_lines,
    unit_verdicts,
)
from patchit.harnesses.dbt.warehouse_gate import GATE_FIELD
from patchit.harnesses.dbt.worker_handle import STARTUP_TIMEOUT_S, WarmDbtWorker, read_run_results
from patchit.harnesses.warm import kill_process_group, popen_sandboxed
from patchit.sandbox.dbt_profile import (
    resolve_dbt_target,
)
from patchit.sandbox.isolation import (
    Sandbox,
    allowed_env,
    make_sandbox,
    patchit_areas,
    shared_cache,
)
from patchit.sandbox.postgres import is_postgres
from patchit.sandbox.snapshot import copy_for_candidate, user_parse_file
from patchit.sandbox.snowflake import is_snowflake
from patchit.screen.dbt import DbtScreen, Where


class DbtHarness:
    """Re-runs a failed dbt node and its descendants in the candidate's sandbox."""

    name: ClassVar[str] = "dbt"
    # verify() may run in several threads at once (each run its own fork of the worker, or
    # its own process): the data check builds its baseline beside a candidate's verify
    concurrent_verify: ClassVar[bool] = True

    def __init__(
        self, timeout_s: float = 600, warm: bool = True, sandbox: SandboxConfig | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.warm = warm
        self.sandbox = sandbox or SandboxConfig()
        self._worker: WarmDbtWorker | None = None
        self._worker_config: SandboxConfig | None = None  # the config the worker started with
        # guards the worker, the parse cache and `_in_flight`; not held while dbt runs
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified as a run in the worker ends
        self._in_flight = 0  # verify() calls running dbt in the worker now
        self._cancel = threading.Event()  # set by close(): a background start gives up
        self._parses = ParseSeeds()  # the saved parse each run starts from (parses)
        self.screener = DbtScreen()  # one incident's schema-only clone, kept until close()
        self._pg = PgSchemas()  # a Postgres target's sandbox schemas, dropped by close()
        self._sf = SfSchemas()  # a Snowflake target's, likewise
        self.notices: list[str] = []  # what close() could not clean up
        # where the last verify's time went, part by part (`phases.breakdown_ms`)
        self.last_breakdown_ms: dict[str, float] = {}

    @property
    def last_parse_mode(self) -> str:
        """How the last verify's dbt parsed: "partial", "full: <dbt's reason>", "unknown"."""
        return self._parses.last_mode

    @property
    def last_files_from_saved(self) -> bool:
        """Whether the last verify's dbt took the root project's files from the failing run's
        parse, the harness having found which differ (`tuning_files`), instead of reading
        them all."""
        return self._parses.last_files_from_saved

    @property
    def last_graph_from_saved(self) -> bool:
        """Whether the last verify's dbt took the graph the worker linked from the failing
        run's parse, relinking only what the candidate changed (`tuning_graph`)."""
        return self._parses.last_graph_from_saved

    @property
    def worker_pid(self) -> int | None:
        """Pid of the live warm worker, None before the first verify or after close()."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive() else None

    def start(self) -> None:
        """Start the warm worker now (it imports dbt: seconds) rather than on first verify."""
        if self.warm:
            with self._lock:
                self._ensure_worker(())

    def start_in_background(self) -> threading.Thread:
        """Spawn the worker now and let it import dbt while, e.g., evidence is gathered;
        verify() waits for it. A worker that cannot start is reported by the next verify(),
        which tries again. The spawn happens in this thread (see WarmDbtWorker.spawn).
        close() does not wait for the start: it kills a worker still importing dbt."""
        cancel = self._cancel = threading.Event()
        if self.warm:
            with self._lock:
                self._ensure_worker((), wait=False)

        def run() -> None:
            with contextlib.suppress(HarnessError), self._lock:
                if self.warm and not cancel.is_set():
                    self._ensure_worker(())

        thread = threading.Thread(target=run, name="patchit-dbt-worker-start", daemon=True)
        thread.start()
        return thread

    def configure(self, config: PatchitConfig) -> None:
        """The repo's time limit and sandbox settings (isolation, network, memory)."""
        self.timeout_s = config.loop.harness_timeout_s
        self.sandbox = config.sandbox

    def warm_up(self, event: UniversalFailureEvent | None = None) -> None:
        """Start the dbt worker in the background (seconds of imports) while, e.g., evidence
        is gathered; with the network when `event`'s target is a server warehouse."""
        if event is not None and event.dbt is not None:
            with contextlib.suppress(PatchitError):  # verify() says what is wrong with it
                self._allow_network_for(resolve_dbt_target(event).output)
        self.start_in_background()
        if event is not None and event.dbt is not None:
            threading.Thread(target=self._prefetch_quietly, args=(event,), daemon=True,
                             name="patchit-dbt-prefetch").start()  # fmt: skip

    def _prefetch_quietly(self, event: UniversalFailureEvent) -> None:
        with contextlib.suppress(Exception):  # a head start only: the verify reads it anyway
            self.prefetch(event)

    def prefetch(self, event: UniversalFailureEvent) -> None:
        """Read now what an incident's first candidate would read first: the failing run's
        manifest and parse file here (what changed, the selection, the slice), and that parse
        decoded in the warm worker. A verify without it reads them itself; nothing fails."""
        if event.dbt is None:
            return
        cancel = self._cancel
        manifest = event.artifacts.get("manifest")
        try:
            target = resolve_dbt_target(event)
            user = user_parse_file(event, target, str(target.output.get("path")))
            if manifest and Path(str(manifest)).is_file():
                manifest_node_names(Path(str(manifest)))  # names, tests, relations: cached
            if user is None:
                return
            read_failing_parse(user)  # what changed is read against it: cached
            if not self.warm or cancel.is_set():
                return
            with self._lock:
                if cancel.is_set():  # closed meanwhile: start no worker after close()
                    return
                worker = self._ensure_worker(())
                spec = self._parses.preload_spec(user)
            if spec is None:
                return
            reply = worker.request({"preload": True, "saved_parse": spec}, STARTUP_TIMEOUT_S)
            if reply is not None and reply.get("kept"):
                with self._lock:
                    self._parses.held(worker.pid, spec["source"])
        except (PatchitError, OSError):
            return  # the verify reads what it needs, and says what is wrong

    def snapshot_taken(self, snapshot: Path) -> None:
        """The incident's DuckDB snapshot (`snapshot`, the file) is made: its catalog is read
        now, in the background, for the first candidate's slice (`slice.snapshot_relations`),
        while the loop gathers evidence."""
        if not self._cancel.is_set():
            threading.Thread(target=self._attach_quietly, args=(snapshot,), daemon=True,
                             name="patchit-dbt-snapshot").start()  # fmt: skip

    def _attach_quietly(self, snapshot: Path) -> None:
        if not self._cancel.is_set():
            with contextlib.suppress(Exception):  # a head start only: the verify reads it
                snapshot_relations(snapshot)

    def _allow_network_for(self, output: dict[str, object]) -> None:
        """A server warehouse (Postgres, Snowflake) must be reachable from the run: the sandbox
        gets the network (the run's code can then open other sockets too; the report says so)."""
        if (is_postgres(output) or is_snowflake(output)) and not self.sandbox.network:
            self.sandbox = self.sandbox.model_copy(update={"network": True})

    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        if event.source is FailureSource.DBT:
            return True
        project = Path(event.dbt.project_dir) if event.dbt else repo
        return (project / "dbt_project.yml").is_file()

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        """Changed Python files compiled, changed models' SQL bound by DuckDB (`EXPLAIN`)
        against a schema-only clone of the incident's snapshot; no dbt process."""
        try:
            project_dir, _ = sandbox_paths(workspace, event)
        except HarnessError as exc:
            return Screening.nothing(str(exc))
        with contextlib.suppress(PatchitError):  # verify() says what is wrong with the profile
            output = resolve_dbt_target(event).output
            if is_postgres(output) or is_snowflake(output):
                kind = "Postgres" if is_postgres(output) else "Snowflake"
                return Screening.nothing(f"a {kind} target has no local clone to bind SQL in")
        project = PurePosixPath(project_dir.relative_to(workspace.root).as_posix())
        return self.screener.screen(Where(workspace.root, project, workspace.snapshot), event,
                                    changed)  # fmt: skip

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        started = time.monotonic()
        project_dir, cwd = sandbox_paths(workspace, event)
        self._pg.clone = self.sandbox.pg_clone
        self._pg.clone_limit = self.sandbox.pg_clone_limit_mb * 2**20
        self._pg.role = self.sandbox.pg_role
        self._sf.role = self.sandbox.sf_role
        self._sf.own_database = self.sandbox.sf_database
        box = prepare(workspace, event, project_dir, cwd, self._pg, self._sf)
        env = run_env(event, project_dir, workspace.scratch.resolve(), box.clean_files) | box.env
        prepare_ms = (time.monotonic() - started) * 1000
        need = (workspace.root, workspace.scratch)
        if box.pg_schema is not None:
            self._allow_network_for({"type": "postgres"})
        with self._lock:
            worker = self._ensure_worker(need) if self.warm else None
            seeding = time.monotonic()
            saved_parse = self._parses.seed(box, worker.pid if worker is not None else None)
            box.spent_ms["saved parse"] = (time.monotonic() - seeding) * 1000
            prepare_ms += box.spent_ms["saved parse"]
            self._in_flight += worker is not None
        outcome: DbtOutcome | None = None
        try:  # outside the lock: another verify (the data check's baseline) may run beside
            if worker is not None:
                sandbox = worker.sandbox
                writable = sandbox.narrowed(*need) if sandbox.narrows else None
                live = worker

                def run(args: list[str], log: Path) -> DbtOutcome:
                    return self._run_warm(live, args, box.cwd, env, log, writable, saved_parse,
                                          gate_of(box))  # fmt: skip
            else:
                sandbox = make_sandbox(self.sandbox, need)

                def run(args: list[str], log: Path) -> DbtOutcome:
                    return self._run_fresh(args, box.cwd, env, log, box.target_dir, sandbox,
                                           saved_parse, gate_of(box))  # fmt: skip

            if box.pg_schema is not None and box.snowflake:
                listed = guard_schemas(box, run)
                box.pg_notes = clone_incrementals(
                    box,
                    listed,
                    self._sf.warehouse_of(box.pg_schema),
                    event.dbt.started_utc if event.dbt else None,
                )
            elif box.pg_schema is not None:
                listed = guard_schemas(box, run)
                admit_built(box, listed, self._pg.warehouse_of(box.pg_schema))
                copy_limit = self.sandbox.pg_copy_limit_mb * 2**20
                box.pg_notes = seed_incrementals(
                    box, listed, self._pg.warehouse_of(box.pg_schema), copy_limit
                )
            running = time.monotonic()
            start_warehouse(box)
            outcome = run(box.args, box.log_path)
            settle_warehouse(box)  # the cut beside the run's start
            if box.warehouse_slice is not None and missed_relation(outcome):
                outcome = self._on_whole_copy(box, run)
            run_ms = (time.monotonic() - running) * 1000
        finally:
            if box.cut is not None:  # the run raised: the cut is waited for, its result dropped
                box.cut.finish()
            with self._lock:
                self._in_flight -= worker is not None
                self._idle.notify_all()
                pid = worker.pid if worker is not None else None
                self._parses.after(box, outcome, pid, saved_parse)
        units = incident_units(event)
        known = [str(u) for u in event.context.get("known_failing") or []]
        passed, failures, set_aside = judge_with_known(outcome, event.unit_id, units[1:], known)
        output = tail_lines(box.log_path)
        if set_aside:
            output += (f"\npatchit: set aside, failing on this line before this candidate (which "
                       f"does not edit them): {', '.join(set_aside)}")  # fmt: skip
        if outcome.exception and outcome.exception not in output:
            output = f"{output}\n{outcome.exception}".strip()
        limit = None
        if outcome.timed_out:
            output = f"{output}\npatchit: dbt stopped after {self.timeout_s:g} s".strip()
            limit = "time"
        elif not passed:
            errors = [str(r.get("message") or "") for r in outcome.results
                      if str(r.get("unique_id")) in failures]  # fmt: skip
            limit = sandbox.limit_in(output, "\n".join([*errors, outcome.exception or ""]))
            if limit == "memory" and worker is not None:
                self._drop_after_runs(worker)  # an allocation failed somewhere in it
        total_ms = (time.monotonic() - started) * 1000
        self.last_breakdown_ms = breakdown_ms(
            box.spent_ms,
            prepare_ms,
            outcome.phases_ms,
            outcome.duration_ms,
            run_ms,
            total_ms,
            "worker: fork and reply" if worker is not None else "process: start and reply",
        )
        return Verification(
            passed=passed,
            harness=self.name,
            command=shlex.join(["dbt", *box.args]),
            output=output,
            failures=failures,
            duration_ms=int((time.monotonic() - started) * 1000),
            isolation=sandbox.describe()
            + (
                sf_note(
                    box,
                    self._sf.role_notes.get(box.pg_schema or "", ""),
                    self._sf.own_notes.get(box.pg_schema or "", ""),
                )
                if box.snowflake
                else warehouse_note(box) + box.duckdb_note
            ),
            fidelity="runtime",
            limit_hit=limit,
            outputs=sf_outputs(box) if box.snowflake else pg_outputs(box) | slice_outputs(box),
            units=unit_verdicts(outcome, units, passed),
            set_aside=set_aside,
        )

    @staticmethod
    def _on_whole_copy(box: DbtSandbox, run: Callable[[list[str], Path], DbtOutcome]) -> DbtOutcome:
        """Run again on a copy of the whole snapshot: the slice lacked a relation the run read
        outside the manifest's graph (raw SQL, a macro), which the user's warehouse has."""
        assert box.warehouse_slice is not None and box.db_copy is not None
        copy_for_candidate(box.warehouse_slice, box.db_copy.parent)
        box.warehouse_slice = None
        box.duckdb_note = (
            "; DuckDB warehouse: a copy of the whole incident snapshot (a slice of what the "
            "selection reads lacked a relation the run read; run again)"
        )
        for stale in (box.log_path, box.target_dir / RUN_NODES_FILE):
            stale.unlink(missing_ok=True)
        return run(box.args, box.log_path)

    def release(self, area: Path) -> None:
        """Drop the Postgres and Snowflake sandbox schemas of the workspaces under `area` (the
        incident is over), and the DuckDB snapshot kept attached for slicing (its file is
        removed with the incident); the warm worker stays for the next incident."""
        release_snapshots()
        self.notices += self._pg.release(area) + self._sf.release(area)

    def close(self) -> None:
        """Stop the worker and drop the caches. A worker still importing dbt (a background
        start nothing needed: no candidate reached verify) is killed at once, not awaited."""
        self._cancel.set()
        worker = self._worker
        if worker is not None and worker.starting:
            worker.kill()  # the start's wait ends; it reaps the worker and lets the lock go
        self.screener.close()
        release_snapshots()
        self.notices += self._pg.close() + self._sf.close()
        with self._lock:
            self._parses.close()
            if self._worker is not None:
                self._worker.stop()
                self._worker = None

    def __enter__(self) -> DbtHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running dbt ----------------------------------------------------------------------

    def _ensure_worker(self, need: tuple[Path, ...], wait: bool = True) -> WarmDbtWorker:
        """The live worker if its sandbox lets it write `need` under the current config; else
        a new one (the old one is stopped: it died, or its sandbox is the wrong one). With
        `wait`, it has finished importing dbt when this returns. A worker that must be
        replaced while runs use it is replaced once they are done."""

        def usable(worker: WarmDbtWorker | None) -> bool:
            return (
                worker is not None
                and worker.alive()
                and self._worker_config == self.sandbox
                and worker.sandbox.covers(*need)
            )

        while self._in_flight and not usable(self._worker):  # not replaced under a run
            self._idle.wait()
        worker = self._worker
        if worker is None or not usable(worker):
            self._drop_worker()
            worker = adopt(self.sandbox, need)  # one the wrapper started at dbt's first error
            if worker is None:
                sandbox: Sandbox = make_sandbox(self.sandbox, patchit_areas(*need), warm=True)
                worker = WarmDbtWorker.spawn(sandbox)
            self._worker = worker
            self._worker_config = self.sandbox.model_copy()
        if wait:
            try:
                worker.wait_ready(STARTUP_TIMEOUT_S)
            except HarnessError:
                self._worker = None
                raise
        return worker

    def _drop_after_runs(self, worker: WarmDbtWorker) -> None:
        """Stop `worker` (if still the harness's) once no run uses it; the next verify starts
        afresh."""
        with self._lock:
            while self._in_flight:
                self._idle.wait()
            if self._worker is worker:
                self._drop_worker()

    def _drop_worker(self) -> None:
        if self._worker is not None:
            with contextlib.suppress(OSError):
                self._worker.stop()
            self._worker = None

    def _run_warm(
        self,
        worker: WarmDbtWorker,
        args: list[str],
        cwd: Path,
        env: dict[str, str],
        log: Path,
        writable: list[str] | None = None,
        saved_parse: dict[str, Any] | None = None,
        gate: str | None = None,
    ) -> DbtOutcome:
        # dbt's debug log is not written: nothing reads it (the reply says how dbt parsed)
        request: dict[str, object] = {
            "args": [*args, "--log-level-file", "none"], "cwd": str(cwd), "env": env,
            "log_path": str(log),
        }  # fmt: skip
        if writable:
            request["writable"] = writable
        if saved_parse:
            request["saved_parse"] = saved_parse
        if gate:
            request[GATE_FIELD] = gate
        reply = worker.request(request, self.timeout_s)
        if reply is not None and reply.get("worker_died") and not log.exists():
            # It died before it began this request (killed while idle, the kill still landing
            # when alive() was asked): the request itself is not to blame, so run it again.
            with self._lock:
                if self._worker is worker:
                    self._drop_worker()
                    self._worker = WarmDbtWorker.start(worker.sandbox)
                    self._worker_config = self.sandbox.model_copy()
                worker = self._ensure_worker(())
                self._in_flight += 1
            try:
                reply = worker.request(request, self.timeout_s)
            finally:
                with self._lock:
                    self._in_flight -= 1
                    self._idle.notify_all()
        if reply is None:  # timed out: the worker was killed, the next verify starts another
            with self._lock:
                if self._worker is worker:
                    self._worker = None
            return DbtOutcome(success=False, timed_out=True)
        return _outcome(reply)

    def _run_fresh(
        self,
        args: list[str],
        cwd: Path,
        env: dict[str, str],
        log: Path,
        target_dir: Path,
        sandbox: Sandbox,
        saved_parse: dict[str, Any] | None = None,
        gate: str | None = None,
    ) -> DbtOutcome:
        """One run in a fresh process of its own (`worker --once`): dbt as the warm worker runs
        it, with nothing carried over from another run."""
        if not _dbt_installed():
            raise HarnessError("dbt is not installed; install it with `pip install 'patchit[dbt]'`")
        request = {"args": [*args, "--log-level-file", "none"], "cwd": str(cwd), "env": env,
                   "log_path": str(log)}  # fmt: skip
        if saved_parse:
            request["saved_parse"] = saved_parse
        if gate:
            request[GATE_FIELD] = gate
        (target_dir / "run_results.json").unlink(missing_ok=True)
        argv = [sys.executable, "-m", "patchit.harnesses.dbt.worker", "--once"]
        schemas = {SCHEMAS_ENV: str(shared_cache() / SCHEMAS_FILE)}  # a worker's (read-only)
        with log.open("ab") as out:
            proc = popen_sandboxed(
                argv, sandbox, cwd=cwd, env=allowed_env(os.environ) | env | schemas,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out,
            )  # fmt: skip
            try:
                stdout, _ = proc.communicate(json.dumps(request).encode() + b"\n", self.timeout_s)
            except subprocess.TimeoutExpired:
                kill_process_group(proc)
                return DbtOutcome(success=False, timed_out=True)
        try:
            reply = json.loads(stdout.decode("utf-8", errors="replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            reply = None
        if not isinstance(reply, dict):
            return DbtOutcome(
                success=False,
                exception=f"dbt exited with code {proc.returncode} and no result",
                results=read_run_results(target_dir / "run_results.json"),
            )
        return _outcome(reply)


def gate_of(box: DbtSandbox) -> str | None:
    """The file a run's first connection waits for: its warehouse being cut beside it."""
    return str(box.cut.gate) if box.cut is not None else None


def _outcome(reply: dict[str, Any]) -> DbtOutcome:
    """A run's outcome from the reply of `worker` (warm, or `--once`)."""
    return DbtOutcome(
        success=bool(reply.get("success")),
        exception=reply.get("exception"),
        results=list(reply.get("results") or []),
        parse_mode=reply.get("parse"),
        saved_parse_kept=bool(reply.get("saved_parse_kept")),
        files_from_saved=bool(reply.get("files_from_saved")),
        graph_from_saved=bool(reply.get("graph_from_saved")),
        phases_ms=dict(reply.get("phases_ms") or {}),
        duration_ms=reply.get("duration_ms"),
    )


def _dbt_installed() -> bool:
    """Whether dbt-core is importable, asked without importing it (seconds, in this process)."""
    spec = importlib.util.find_spec("dbt")
    places = spec.submodule_search_locations if spec is not None else None
    return any((Path(place) / "cli" / "main.py").is_file() for place in places or ())

"""Preparing one dbt run of the dbt harness: where the project and the failing run's cwd are
in the worktree, what the run's environment holds, the candidate's copy of the warehouse (a
DuckDB slice of what the selection reads or a whole copy, a Postgres or Snowflake sandbox
schema), the sandbox profile, and dbt's arguments
(the failing selection, `--state` for `state:modified+`, `--defer` on Postgres and Snowflake)."""

from __future__ import annotations

import functools
import os
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.project_index import node_names
from patchit.evidence.redact import MASK
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.changes import (
    Changes,
    agrees_with_manifest,
    candidate_changes,
    manifest_graph,
    manifest_node_names,
    models_of_tests,
    read_failing_parse,
)
from patchit.harnesses.dbt.clean_files import clean_blobs
from patchit.harnesses.dbt.pg import PgSchemas
from patchit.harnesses.dbt.protocol import RUN_NODES_FILE
from patchit.harnesses.dbt.sf import SfSchemas
from patchit.harnesses.dbt.slice import (
    Relation,
    selection_reads,
    slice_database,
    snapshot_relations,
)
from patchit.harnesses.dbt.units import (
    FRESH,
    DbtSandbox,
    replay_env,
    select_units,
    unbuilt_nodes,
)
from patchit.harnesses.dbt.warehouse_gate import GATE_FILE, WarehouseCut
from patchit.sandbox import snowflake
from patchit.sandbox.dbt_profile import (
    resolve_dbt_target,
    sandbox_db_location,
    user_target_dir,
    write_sandbox_profile,
)
from patchit.sandbox.envrefs import referenced_env_names
from patchit.sandbox.isolation import allowed_env
from patchit.sandbox.pg_clone import Clone, rewrite_manifest
from patchit.sandbox.postgres import PASSWORD_ENV, is_postgres, password_of
from patchit.sandbox.sf_database import OwnDatabase, rewrite_sf_manifest
from patchit.sandbox.snapshot import (
    PARTIAL_PARSE_FILE,
    copy_for_candidate,
    parse_cache_key,
    user_parse_file,
    wal_path,
    warehouse_relations,
)
from patchit.sandbox.worktree import carry_packages


def run_env(
    event: UniversalFailureEvent,
    project_dir: Path,
    scratch: Path,
    clean: dict[str, str] | None = None,
) -> dict[str, str]:
    """What one run sees on top of the worker's allowlisted environment: the failing run's
    DBT_* variables, the variables the project's `env_var()` calls name (from the failing
    run's environment when it recorded them, else patchit's own), HOME in the scratch.
    `clean`: the worktree's files git knows to be as committed (`clean_blobs`), whose names
    are read once per blob."""
    env: dict[str, str] = {}
    recorded = event.dbt.env if event.dbt else {}
    root = str(project_dir)
    known = {os.path.join(root, rel): key for rel, key in clean.items()} if clean else None
    for name in sorted(referenced_env_names([project_dir], known=known)):
        if name.startswith("DBT_"):
            continue  # replay_env decides about those
        value = recorded.get(name, os.environ.get(name))
        if value is not None and value != MASK:
            env[name] = value
    env = allowed_env(env, referenced=env)
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return {**env, **replay_env(event), "HOME": str(home), "TMPDIR": str(tmp)}


def sandbox_paths(workspace: Workspace, event: UniversalFailureEvent) -> tuple[Path, Path]:
    """The project dir and the cwd of the failing run, re-rooted inside the worktree."""
    if event.dbt is None or event.repo_path is None:
        raise HarnessError(f"{event.short()}: a dbt event needs `dbt` and `repo_path` to replay")
    repo = Path(event.repo_path).resolve()
    try:
        rel_project = Path(event.dbt.project_dir).resolve().relative_to(repo)
    except ValueError as exc:
        raise HarnessError(
            f"dbt project {event.dbt.project_dir} is outside the repository {repo}"
        ) from exc
    project_dir = workspace.root / rel_project
    if not (project_dir / "dbt_project.yml").is_file():
        raise HarnessError(f"{project_dir}: no dbt_project.yml in the worktree")
    try:
        cwd = workspace.root / Path(event.dbt.cwd).resolve().relative_to(repo)
    except ValueError:
        cwd = project_dir  # dbt ran from outside the repo; the project dir is the best stand-in
    return project_dir, cwd if cwd.is_dir() else project_dir


def prepare(
    workspace: Workspace,
    event: UniversalFailureEvent,
    project_dir: Path,
    cwd: Path,
    pg: PgSchemas,
    sf: SfSchemas | None = None,
) -> DbtSandbox:
    """Packages, DB copy, sandbox profile and state; returns what to run and where."""
    assert event.dbt is not None
    spent_ms: dict[str, float] = {}
    scratch = workspace.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    carry_packages(Path(event.dbt.project_dir), project_dir)
    manifest = event.artifacts.get("manifest")
    with_state = bool(manifest) and Path(str(manifest)).is_file()
    env: dict[str, str] = {}
    pg_schema: str | None = None
    clone: Clone | None = None
    pg_role: str | None = None
    on_snowflake = False
    sf_own: OwnDatabase | None = None
    slice_from: Path | None = None  # the snapshot a DuckDB slice is cut from (`slice`)
    try:
        target = resolve_dbt_target(event)
        path_text = str(target.output.get("path") or ":memory:")
        db_copy = scratch / "memory.duckdb"  # unused: an in-memory target has no file
        relations: set[str] | None = None  # none: an in-memory target starts empty
        if is_postgres(target.output):
            # A schema of its own; unselected refs read the user's relations (--defer)
            placed = pg.place(target.output, scratch, Path(str(manifest)) if with_state else None)
            pg_schema, relations, clone = placed.schema, placed.relations, placed.clone
            pg_role = placed.role.role if placed.role is not None else None
            target = replace(target, output=placed.output)  # the incident's database
            path_text = pg_schema
            if (password := password_of(target.output)) is not None:
                env[PASSWORD_ENV] = password
            if not with_state:
                relations = None  # nothing to defer to: build the whole upstream here
        elif snowflake.is_snowflake(target.output):
            # A schema of its own in the user's database; unselected refs read the user's
            # relations (--defer), nothing copied (`patchit.sandbox.snowflake`)
            on_snowflake = True
            placed_sf = (sf or SfSchemas()).place(
                target.output, scratch, Path(str(manifest)) if with_state else None
            )
            pg_schema, relations = placed_sf.schema, placed_sf.relations
            sf_own = placed_sf.own if placed_sf.own and placed_sf.own.name else None
            target = replace(target, output=placed_sf.output)  # as the operator's sf_role
            path_text = pg_schema
            if (password := snowflake.password_of(target.output)) is not None:
                env[snowflake.PASSWORD_ENV] = password
            if not with_state:
                relations = None
        elif target.db_path is not None:
            db_copy, path_text = sandbox_db_location(target, cwd, workspace.root)
            copying = time.perf_counter()
            slice_from = _snapshot_file(workspace, target.db_path.name)
            if slice_from is not None:  # the copy waits for the selection (`slice`)
                relations = _relations(workspace, target.db_path.name, slice_from, sliced=True)
            else:
                warehouse = place_database(workspace, target.db_path, db_copy)
                relations = _relations(workspace, target.db_path.name, warehouse)
            spent_ms["warehouse copy"] = _ms_since(copying)
        write_sandbox_profile(target, db_copy, scratch, path_text=path_text, schema=pg_schema)
    except BadInputError as exc:
        raise HarnessError(f"cannot build the dbt sandbox: {exc}") from exc

    # What the candidate changed, by name, instead of dbt's state comparison (a third of a
    # warm run on a large project); dbt still judges what the failing run's parse cannot.
    selecting = time.perf_counter()
    clean = clean_blobs(project_dir) if with_state else None  # also what `run_env` reads
    changes = _changes(event, project_dir, clean) if clean is not None else None
    changed = changes.names if changes is not None else None
    names = manifest_node_names(Path(str(manifest))) if changed is not None else None
    # the worktree's nodes: the failing run's and what the candidate added, else a scan
    all_names = [*names, *changed] if names is not None and changed is not None else None
    unbuilt = unbuilt_nodes(all_names or node_names(project_dir), relations)
    tested = models_of_tests(Path(str(manifest))) if with_state else None
    # a failing run that built nothing (no manifest: it failed at parse) left the warehouse as
    # the last good run did: what the breaking change edited is rebuilt (`loop.break_nodes`)
    rebuilt = () if with_state else tuple(str(n) for n in event.context.get("break_nodes") or ())
    selectors = select_units(
        event, with_state and changed is None, unbuilt, (*(changed or ()), *rebuilt), tested
    )
    spent_ms["selection"] = _ms_since(selecting)
    args = ["build"]
    if selectors:
        args += ["--select", *selectors]
    args += ["--project-dir", str(project_dir), "--profiles-dir", str(scratch)]
    # --profile/--target only as the user gave them: dbt hashes them for partial parsing,
    # and the sandbox profile's default target is the user's target anyway.
    if event.dbt.profile:
        args += ["--profile", event.dbt.profile]
    if event.dbt.target:
        args += ["--target", target.target]
    replay_vars = event.dbt.replay_vars()
    if replay_vars:
        args += ["--vars", replay_vars]
    if "--full-refresh" in event.dbt.args or "-f" in event.dbt.args:
        args.append("--full-refresh")
    if unbuilt is FRESH:
        # nothing is built yet: a test of a built ancestor that also reads a node outside the
        # selection (a relationships test) would fail for want of that relation, so only the
        # tests whose parents this run builds are run (dbt's `buildable`)
        args += ["--indirect-selection", "buildable"]
    state_manifest: Path | None = None
    if with_state and (changed is None or pg_schema is not None):  # --defer reads it
        state_dir = scratch / "state"
        state_dir.mkdir(exist_ok=True)
        state_manifest = state_dir / "manifest.json"
        if clone is not None and clone.name is not None:  # --defer reads the clone's copies
            rewrite_manifest(Path(str(manifest)), state_manifest, clone.source, clone.name)
        elif sf_own is not None and sf_own.name is not None:  # likewise on Snowflake
            rewrite_sf_manifest(Path(str(manifest)), state_manifest, sf_own.source, sf_own.name)
        else:
            shutil.copyfile(str(manifest), state_manifest)
        args += ["--state", str(state_dir)]
        if pg_schema is not None:
            args.append("--defer")
    args += ["--target-path", str(scratch / "target"), "--log-path", str(scratch / "logs")]
    log_path = scratch / "dbt_output.log"
    log_path.unlink(missing_ok=True)
    (scratch / "target" / RUN_NODES_FILE).unlink(missing_ok=True)  # an earlier run's
    placing = None
    if slice_from is not None:  # cut while the run starts (`start_warehouse`)
        placing = functools.partial(
            _place_warehouse, workspace, slice_from, db_copy,
            Path(str(manifest)) if with_state else None, selectors, changed or (), project_dir,
        )  # fmt: skip
    return DbtSandbox(
        args=args,
        cwd=cwd,
        log_path=log_path,
        target_dir=scratch / "target",
        # dbt's parse keeps absolute paths (seed files): reuse it only in the same worktree
        parse_key=parse_cache_key(event, target, path_text, workspace.root),
        project_dir=project_dir,
        user_parse_file=user_parse_file(event, target, path_text),
        env=env,
        pg_schema=pg_schema,
        pg_role=pg_role,
        pg_clone=clone,
        snowflake=on_snowflake,
        sf_database=sf_own.name if sf_own is not None else None,
        state_manifest=state_manifest,
        spent_ms=spent_ms,
        db_copy=db_copy if placing is not None else None,
        place_warehouse=placing,
        changed_files=changes.files if changes is not None else None,
        clean_files=clean,
    )


def _snapshot_file(workspace: Workspace, db_name: str) -> Path | None:
    """The incident snapshot's DuckDB file, when there is one to cut a slice from (never the
    user's own file: opening it, even read-only, would lock out the user's next dbt run)."""
    if workspace.snapshot is None:
        return None
    snapshot = workspace.snapshot / db_name
    return snapshot if snapshot.is_file() else None


def _place_slice(
    snapshot: Path, db_copy: Path, reads: set[Relation] | None
) -> tuple[int | None, str]:
    """Cut the candidate's warehouse from `snapshot` as the relations its run reads: (how many
    it copied, ""), or (None, why the whole file must be copied) (see `slice`)."""
    if reads is None:
        return None, "what the run reads is not known from the failing run's manifest"
    import duckdb

    try:
        return slice_database(snapshot, db_copy, reads), ""
    except duckdb.Error as exc:
        return None, f"DuckDB could not cut a slice: {str(exc).splitlines()[0]}"


def _place_warehouse(
    workspace: Workspace,
    snapshot: Path,
    db_copy: Path,
    manifest: Path | None,
    selectors: list[str],
    changed: Iterable[str],
    project_dir: Path,
) -> tuple[Path | None, str]:
    """The candidate's DuckDB warehouse at `db_copy`: a slice of `snapshot` as the relations
    the selection reads, else a copy of all of it; (the snapshot when a slice, the note the
    isolation line gives). Runs beside the run's start (`warehouse_gate`)."""
    graph = manifest_graph(manifest) if manifest is not None else None
    reads = selection_reads(graph, selectors, changed, project_dir) if graph else None
    copied, why = _place_slice(snapshot, db_copy, reads)
    if copied is None:
        place_database(workspace, snapshot, db_copy)
        return None, f"; DuckDB warehouse: a copy of the whole incident snapshot ({why})"
    return snapshot, (
        f"; DuckDB warehouse: {copied} relation(s) the selection reads, copied from the "
        "incident snapshot (attached read-only)"
    )


def start_warehouse(box: DbtSandbox) -> None:
    """Right before the run: its DuckDB warehouse cut in a thread, the run told to wait for it
    at its first connection (`warehouse_gate`); nothing when `prepare` placed it already."""
    place, box.place_warehouse = box.place_warehouse, None
    if place is not None:
        box.cut = WarehouseCut(box.target_dir.parent / GATE_FILE, place)


def settle_warehouse(box: DbtSandbox) -> None:
    """Once the run is over: wait for the warehouse cut beside it and note what it placed;
    the cut's error raised (the run stopped at its first connection without it)."""
    cut, box.cut = box.cut, None
    if cut is None:
        return
    box.warehouse_slice, box.duckdb_note = cut.result()
    if box.warehouse_slice is None:
        box.db_copy = None


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _changes(
    event: UniversalFailureEvent, project_dir: Path, clean: dict[str, str]
) -> Changes | None:
    """What the candidate's worktree changed against the failing run's parse: the nodes by
    name, and the files; None when only `state:modified+` can say (see `changes`)."""
    assert event.dbt is not None
    parse = read_failing_parse(user_target_dir(event) / PARTIAL_PARSE_FILE)
    if parse is None or not agrees_with_manifest(parse, Path(str(event.artifacts["manifest"]))):
        return None
    return candidate_changes(parse, project_dir, clean)


def _relations(
    workspace: Workspace, db_name: str, warehouse: Path | None, sliced: bool = False
) -> set[str] | None:
    """The relations of the incident snapshot, read once per snapshot from `warehouse`: the
    snapshot itself, read-only (patchit's own copy; `sliced`: from the connection the slice is
    cut with), or a candidate's copy of it."""
    snapshot = workspace.snapshot / db_name if workspace.snapshot is not None else None
    try:
        stat = snapshot.stat() if snapshot is not None and warehouse is not None else None
    except OSError:
        stat = None
    if snapshot is None or stat is None:
        return warehouse_relations(warehouse)
    key = (str(snapshot), stat.st_mtime_ns, stat.st_size)
    with _RELATIONS_LOCK:
        cached = _RELATIONS.get(key)
    if cached is None:
        if sliced and warehouse is not None:
            cached = frozenset(snapshot_relations(warehouse))
        else:
            cached = frozenset(warehouse_relations(warehouse) or ())
        with _RELATIONS_LOCK:
            _RELATIONS[key] = cached
            while len(_RELATIONS) > 8:
                _RELATIONS.pop(next(iter(_RELATIONS)))
    return set(cached)


_RELATIONS: dict[tuple[str, int, int], frozenset[str]] = {}
_RELATIONS_LOCK = threading.Lock()


def place_database(workspace: Workspace, user_db: Path, db_copy: Path) -> Path | None:
    """Put the candidate's copy of the incident snapshot at `db_copy`; returns it. With no
    snapshot and no database file at the user's path either (a fresh checkout whose
    failing run never opened it), the run starts on a fresh warehouse: None.

    Either way the copy's folder exists, as it did for the user's run: a `path:` such as
    `target/x.duckdb` lives in a folder dbt made for the user (its target path), which the
    sandbox moves to its scratch, so in a fresh worktree DuckDB could not create the file."""
    db_copy.parent.mkdir(parents=True, exist_ok=True)
    if workspace.snapshot is None and not user_db.is_file():
        for stale in (db_copy, wal_path(db_copy)):
            stale.unlink(missing_ok=True)
        return None
    snapshot_dir = workspace.snapshot or user_db.parent
    copy_for_candidate(snapshot_dir / user_db.name, db_copy.parent)
    return db_copy

"""Preparing one dbt run of the dbt harness: where the project and the failing run's cwd are
in the worktree, what the run's environment holds, the candidate's copy of the warehouse (a
DuckDB copy, or a Postgres sandbox schema), the sandbox profile, and dbt's arguments (the
failing selection, `--state` for `state:modified+`, `--defer` on Postgres)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.project_index import node_names
from patchit.evidence.redact import MASK
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt_pg import PgSchemas
from patchit.harnesses.dbt_units import DbtSandbox, replay_env, select_units, unbuilt_nodes
from patchit.sandbox.dbt_profile import (
    resolve_dbt_target,
    sandbox_db_location,
    write_sandbox_profile,
)
from patchit.sandbox.envrefs import referenced_env_names
from patchit.sandbox.isolation import allowed_env
from patchit.sandbox.postgres import PASSWORD_ENV, is_postgres, password_of
from patchit.sandbox.snapshot import (
    copy_for_candidate,
    parse_cache_key,
    user_parse_file,
    wal_path,
    warehouse_relations,
)
from patchit.sandbox.worktree import carry_packages


def run_env(event: UniversalFailureEvent, project_dir: Path, scratch: Path) -> dict[str, str]:
    """What one run sees on top of the worker's allowlisted environment: the failing run's
    DBT_* variables, the variables the project's `env_var()` calls name (from the failing
    run's environment when it recorded them, else patchit's own), HOME in the scratch."""
    env: dict[str, str] = {}
    recorded = event.dbt.env if event.dbt else {}
    for name in sorted(referenced_env_names([project_dir])):
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
) -> DbtSandbox:
    """Packages, DB copy, sandbox profile and state; returns what to run and where."""
    assert event.dbt is not None
    scratch = workspace.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    carry_packages(Path(event.dbt.project_dir), project_dir)
    manifest = event.artifacts.get("manifest")
    with_state = bool(manifest) and Path(str(manifest)).is_file()
    env: dict[str, str] = {}
    pg_schema: str | None = None
    try:
        target = resolve_dbt_target(event)
        path_text = str(target.output.get("path") or ":memory:")
        db_copy = scratch / "memory.duckdb"  # unused: an in-memory target has no file
        relations: set[str] | None = None  # none: an in-memory target starts empty
        if is_postgres(target.output):
            # A schema of its own; unselected refs read the user's relations (--defer)
            pg_schema, relations = pg.place(
                target.output, scratch, Path(str(manifest)) if with_state else None
            )
            path_text = pg_schema
            if (password := password_of(target.output)) is not None:
                env[PASSWORD_ENV] = password
            if not with_state:
                relations = None  # nothing to defer to: build the whole upstream here
        elif target.db_path is not None:
            db_copy, path_text = sandbox_db_location(target, cwd, workspace.root)
            warehouse = place_database(workspace, target.db_path, db_copy)
            relations = warehouse_relations(warehouse)
        write_sandbox_profile(target, db_copy, scratch, path_text=path_text, schema=pg_schema)
    except BadInputError as exc:
        raise HarnessError(f"cannot build the dbt sandbox: {exc}") from exc

    unbuilt = unbuilt_nodes(node_names(project_dir), relations)
    selectors = select_units(event, with_state, unbuilt)
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
    if "--full-refresh" in event.dbt.args:
        args.append("--full-refresh")
    if with_state:
        state_dir = scratch / "state"
        state_dir.mkdir(exist_ok=True)
        shutil.copyfile(str(manifest), state_dir / "manifest.json")
        args += ["--state", str(state_dir)]
        if pg_schema is not None:
            args.append("--defer")
    args += ["--target-path", str(scratch / "target"), "--log-path", str(scratch / "logs")]
    log_path = scratch / "dbt_output.log"
    log_path.unlink(missing_ok=True)
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
    )


def place_database(workspace: Workspace, user_db: Path, db_copy: Path) -> Path | None:
    """Put the candidate's copy of the incident snapshot at `db_copy`; returns it. With no
    snapshot and no database file at the user's path either (a fresh checkout whose
    failing run never opened it), the run starts on a fresh warehouse: None."""
    if workspace.snapshot is None and not user_db.is_file():
        for stale in (db_copy, wal_path(db_copy)):
            stale.unlink(missing_ok=True)
        return None
    snapshot_dir = workspace.snapshot or user_db.parent
    copy_for_candidate(snapshot_dir / user_db.name, db_copy.parent)
    return db_copy

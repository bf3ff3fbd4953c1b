"""Where a harness run left what the data check compares.

dbt: the run's DuckDB copy (placed by the dbt harness inside the worktree, see
`sandbox_db_location`), and `run_results.json`/`manifest.json` under `<scratch>/target`.
Airflow: `<scratch>/airflow_result.json`, which holds the XComs and the written files' hashes.
A harness may name them itself in `Verification.outputs` ("duckdb", "target", "result");
otherwise they are found by the same rules the harnesses use.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.packages import package_path
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.preparation import sandbox_paths
from patchit.harnesses.dbt.protocol import RUN_NODES_FILE
from patchit.harnesses.dbt.slice import SLICE_OF
from patchit.sandbox.dbt_profile import resolve_dbt_target, sandbox_db_location
from patchit.sandbox.pg_clone import with_dbname

BUILT_TYPES = ("model", "seed", "snapshot")


@dataclass
class BuiltNode:
    """A relation one dbt run built: where it lives and what produced it."""

    unique_id: str
    schema: str
    name: str
    compiled_code: str
    file: str | None  # repo-relative path of the model/seed file
    parents: list[str]
    config: str = ""  # the node's config (materialization, hooks ...), as comparable text


@dataclass
class DbtOutputs:
    """Where one run's relations are: a DuckDB file, or a Postgres sandbox schema."""

    duckdb: Path | None
    nodes: dict[str, BuiltNode]
    pg_output: dict[str, Any] | None = None  # the profile output it was built with (Postgres)
    pg_schema: str | None = None  # the run's sandbox schema (Postgres, Snowflake)
    sf_output: dict[str, Any] | None = None  # the profile output it was built with (Snowflake)
    slice_of: Path | None = None  # the snapshot a sliced DuckDB warehouse was cut from


def locate_duckdb(workspace: Workspace, event: UniversalFailureEvent, result: Verification) -> Path:
    """The DuckDB file this run wrote; HarnessError when the target has none (in-memory)."""
    if result.outputs.get("duckdb"):
        return Path(result.outputs["duckdb"])
    try:
        target = resolve_dbt_target(event)
    except BadInputError as exc:
        raise HarnessError(f"no dbt target to compare: {exc}") from exc
    if target.db_path is None:
        raise HarnessError("the dbt target is in-memory: there is no database to compare")
    _, cwd = sandbox_paths(workspace, event)  # where the run's relative path resolved
    return sandbox_db_location(target, cwd, workspace.root)[0]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: unreadable dbt artifact for the data check: {exc}") from exc
    return data


def built_nodes(
    target_dir: Path, project_rel: Path, project_dir: Path | None = None
) -> dict[str, BuiltNode]:
    """Relations the run built successfully, from its run_results.json and manifest.json (or
    the warm worker's record of the run's nodes, which it writes instead of the manifest).
    A package's node's file is found under the folder `dbt deps` installed it in
    (`project_dir`, the checkout the run built), so a package upgrade's kept lines are read
    for the relation they build."""
    results = _read_json(target_dir / "run_results.json").get("results") or []
    run_nodes = target_dir / RUN_NODES_FILE
    manifest = _read_json(run_nodes if run_nodes.is_file() else target_dir / "manifest.json")
    nodes: dict[str, BuiltNode] = {}
    for res in results:
        uid = str(res.get("unique_id"))
        node = (manifest.get("nodes") or {}).get(uid)
        if node is None or uid.split(".")[0] not in BUILT_TYPES or res.get("status") != "success":
            continue
        path = node.get("original_file_path")
        if path and project_dir is not None:
            project = (manifest.get("metadata") or {}).get("project_name")
            path = package_path(project_dir, project, uid, str(path))
        nodes[uid] = BuiltNode(
            unique_id=uid,
            schema=str(node.get("schema")),
            name=str(node.get("alias") or node.get("name")),
            compiled_code=str(res.get("compiled_code") or node.get("compiled_code") or ""),
            file=(project_rel / path).as_posix() if path else None,
            parents=list((node.get("depends_on") or {}).get("nodes") or []),
            config=config_text(node.get("config")),
        )
    return nodes


def config_text(config: Any) -> str:
    """A node's config as text two runs' records compare equal on (the manifest's and the
    warm worker's, which leaves unset keys out): keys sorted, unset and empty values left out
    at any depth."""
    if not isinstance(config, dict):
        return ""
    return json.dumps(_set_only(config), sort_keys=True, default=str)


def _set_only(value: Any) -> Any:
    """`value` with unset (None) and empty entries left out of its mappings, at any depth."""
    if not isinstance(value, dict):
        return value
    kept = {k: _set_only(v) for k, v in value.items() if v is not None}
    return {k: v for k, v in kept.items() if v not in ("", [], {})}


def pg_output_of(event: UniversalFailureEvent, outputs: dict[str, Any]) -> dict[str, Any]:
    """The profile output a Postgres run's outputs are in: the user's, its database patchit's
    copy when the run had one (`pg_dbname`). BadInputError when the profile cannot be read."""
    output = resolve_dbt_target(event).output
    if outputs.get("pg_dbname"):
        output = with_dbname(output, str(outputs["pg_dbname"]))
    return output


def project_folder(event: UniversalFailureEvent) -> Path:
    """The dbt project's folder, relative to the repository."""
    assert event.dbt is not None and event.repo_path is not None
    return Path(event.dbt.project_dir).resolve().relative_to(Path(event.repo_path).resolve())


def dbt_outputs(
    workspace: Workspace, event: UniversalFailureEvent, result: Verification, keep: Path | None
) -> DbtOutputs:
    """The run's database and built nodes; `keep` moves the database there (out of a worktree
    about to be removed)."""
    target = Path(result.outputs.get("target") or workspace.scratch / "target")
    project_rel = project_folder(event)
    if result.outputs.get("sf_schema"):  # as on Postgres: the user's database, not a copy
        try:
            output = resolve_dbt_target(event).output
        except BadInputError as exc:
            raise HarnessError(f"no dbt target to compare: {exc}") from exc
        if result.outputs.get("sf_database"):  # patchit's own clone of the user's database
            output = {**output, "database": result.outputs["sf_database"]}
        nodes = built_nodes(target, project_rel)
        return DbtOutputs(None, nodes, None, result.outputs["sf_schema"], sf_output=output)
    if result.outputs.get("pg_schema"):  # it stays in the database until the harness closes
        try:
            output = pg_output_of(event, result.outputs)
        except BadInputError as exc:
            raise HarnessError(f"no dbt target to compare: {exc}") from exc
        return DbtOutputs(
            None,
            built_nodes(target, project_rel, workspace.root / project_rel),
            output,
            result.outputs["pg_schema"],
        )
    db = locate_duckdb(workspace, event, result)
    if not db.is_file():
        raise HarnessError(f"{db}: the run's database copy is missing")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for part in (db, db.with_name(db.name + ".wal")):
            if part.is_file():
                shutil.move(part, keep / part.name)
        db = keep / db.name
    slice_of = result.outputs.get(SLICE_OF)
    return DbtOutputs(
        duckdb=db,
        nodes=built_nodes(target, project_rel, workspace.root / project_rel),
        slice_of=Path(slice_of) if slice_of else None,
    )


def airflow_outputs(workspace: Workspace, result: Verification) -> dict[str, Any]:
    """The runner's result JSON (XComs, written files); HarnessError if the run left none."""
    path = Path(result.outputs.get("result") or workspace.scratch / "airflow_result.json")
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: the Airflow run left no readable result: {exc}") from exc
    if "xcom" not in data and "files" not in data:
        raise HarnessError(f"{path}: the Airflow run recorded no outputs (XComs, files)")
    return data

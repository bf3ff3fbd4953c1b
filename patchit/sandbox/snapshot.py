"""State copied into sandboxes: the user's DuckDB file (once per incident, then once per
candidate) and dbt's partial-parse file (from one candidate's run to the next).

The user's database is only ever read as bytes. It is never opened with DuckDB, which would
take a write lock (and could replay its WAL into it). Copy it after the user's dbt has exited,
so the file and its WAL are consistent.

A carried `partial_parse.msgpack` is only an offer: dbt itself checks its version, vars,
profile, env vars and every file's checksum, and parses in full when anything differs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
from pathlib import Path

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.sandbox.dbt_profile import DbtTarget, user_target_dir

_UNABLE_TO_PARTIAL_PARSE = re.compile(r"Unable to do partial parsing because ([^\n]*)")
_DID_PARTIAL_PARSE = re.compile(r"Partial parsing enabled|skipping parsing")


def wal_path(db_file: Path) -> Path:
    """DuckDB's write-ahead log sits beside the database as `<name>.wal`."""
    return db_file.with_name(db_file.name + ".wal")


def _copy_db(source: Path, dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    # Same file name as the source: dbt-duckdb names the database after the file, and the
    # compiled SQL and the failing run's manifest must agree with the sandbox on it.
    dest = dest_dir / source.name
    shutil.copyfile(source, dest)
    source_wal, dest_wal = wal_path(source), wal_path(dest)
    if source_wal.is_file():
        shutil.copyfile(source_wal, dest_wal)
    else:
        dest_wal.unlink(missing_ok=True)
    return dest


def snapshot_database(db_path: Path, dest_dir: Path) -> Path:
    """Copy the user's DuckDB file (and WAL, if any) into `dest_dir`; returns the copy."""
    if not db_path.is_file():
        raise BadInputError(
            f"{db_path}: the dbt target's DuckDB file does not exist; run dbt once or fix `path:`"
        )
    return _copy_db(db_path, dest_dir)


def copy_for_candidate(snapshot: Path, dest_dir: Path) -> Path:
    """A private copy of the incident snapshot for one candidate's run; returns the copy."""
    if not snapshot.is_file():
        raise HarnessError(f"database snapshot {snapshot} is missing; snapshot the incident again")
    if snapshot.resolve().parent == dest_dir.resolve():
        raise HarnessError(f"refusing to copy snapshot {snapshot} onto itself")
    return _copy_db(snapshot, dest_dir)


def warehouse_relations(db_copy: Path | None) -> set[str] | None:
    """Names of the tables and views in a candidate's database copy (never the user's file),
    read-only; None when there is no warehouse (`db_copy` None or absent: a fresh one).

    A copy DuckDB cannot read (another version's format) gives an empty set: the run then
    builds every upstream node itself, which is slower but judges the candidate the same."""
    if db_copy is None or not db_copy.is_file():
        return None
    try:
        import duckdb
    except ImportError:  # dbt-duckdb brings it; without it there is no DuckDB target to run
        return set()
    try:
        with duckdb.connect(str(db_copy), read_only=True) as con:
            rows = con.execute("select table_name from information_schema.tables").fetchall()
    except duckdb.Error:
        return set()
    return {str(row[0]) for row in rows}


PARTIAL_PARSE_FILE = "partial_parse.msgpack"


def rebase_partial_parse(source: Path, target_dir: Path, project_dir: Path) -> bool:
    """Copy the user's partial-parse file into a run's target dir, re-rooted at `project_dir`.

    dbt keeps the project's absolute root in its parse (`project_root` of every file, and
    `root_path` of every seed, read when the seed is loaded) and does not notice when it moves:
    carried verbatim, a sandbox run would load the user's seed files, not the worktree's (or
    fail where the sandbox hides them). False when there is nothing usable to carry.
    """
    import msgpack  # dbt's own dependency: only reached when dbt wrote the file

    try:
        data = msgpack.unpackb(
            source.read_bytes(), raw=False, strict_map_key=False, ext_hook=msgpack.ExtType
        )
        old_root = _root_project_dir(data)
        if old_root is None:
            return False
        new_root = str(project_dir)

        def moved(path: object) -> object:
            if isinstance(path, str) and (path == old_root or path.startswith(old_root + "/")):
                return new_root + path[len(old_root) :]
            return path

        for entry in (data.get("files") or {}).values():
            where = entry.get("path") if isinstance(entry, dict) else None
            if isinstance(where, dict) and "project_root" in where:
                where["project_root"] = moved(where["project_root"])
        for group in ("nodes", "disabled"):
            for node in _node_dicts(data.get(group)):
                if "root_path" in node:
                    node["root_path"] = moved(node["root_path"])
        packed = msgpack.packb(data, use_bin_type=True)
    except (OSError, ValueError, TypeError, AttributeError, msgpack.UnpackException):
        return False  # a parse not carried costs speed, never correctness
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / PARTIAL_PARSE_FILE).write_bytes(packed)
    return True


def _root_project_dir(data: dict[str, object]) -> str | None:
    metadata = data.get("metadata")
    name = metadata.get("project_name") if isinstance(metadata, dict) else None
    files = data.get("files")
    if not isinstance(name, str) or not isinstance(files, dict):
        return None
    prefix = f"{name}://"
    for key, entry in files.items():
        if isinstance(key, str) and key.startswith(prefix) and isinstance(entry, dict):
            where = entry.get("path")
            root = where.get("project_root") if isinstance(where, dict) else None
            if isinstance(root, str) and root:
                return root.rstrip("/") or None
    return None


def _node_dicts(group: object) -> list[dict[str, object]]:
    """The node dicts of `nodes` (id -> node) or `disabled` (id -> [node, ...])."""
    if not isinstance(group, dict):
        return []
    found: list[dict[str, object]] = []
    for value in group.values():
        for node in value if isinstance(value, list) else [value]:
            if isinstance(node, dict):
                found.append(node)
    return found


def read_parse_mode(log_dir: Path) -> str:
    """How the last dbt run logging to `log_dir` parsed: "partial", "full: <dbt's reason>"
    or "unknown" (no log)."""
    try:
        text = (log_dir / "dbt.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    unable = list(_UNABLE_TO_PARTIAL_PARSE.finditer(text))
    partial = list(_DID_PARTIAL_PARSE.finditer(text))
    if unable and (not partial or unable[-1].start() > partial[-1].start()):
        return f"full: {unable[-1].group(1).strip()}"
    return "partial" if partial else "unknown"


def parse_cache_key(
    event: UniversalFailureEvent, target: DbtTarget, path_text: str, root: Path
) -> str:
    """One partial-parse lineage per worktree, project, profile, target, DB path and dbt
    version: a parse names files by absolute path, so it is only valid where it was made."""
    assert event.dbt is not None
    try:
        dbt_version = importlib.metadata.version("dbt-core")
    except importlib.metadata.PackageNotFoundError:
        dbt_version = "unknown"
    parts = [
        str(Path(event.dbt.project_dir).resolve()), target.profile, target.target,
        json.dumps(target.output, sort_keys=True, default=str), path_text, dbt_version,
        str(root.resolve()),
    ]  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:24]


def user_parse_file(event: UniversalFailureEvent, target: DbtTarget, path_text: str) -> Path | None:
    """The partial-parse file of the user's failing run, when the sandbox's profile hashes the
    same as theirs (their DuckDB `path:` kept verbatim) and that run wrote it."""
    assert event.dbt is not None
    if target.db_path is not None and path_text != str(target.output.get("path")):
        return None
    if event.dbt.started_utc is None:
        return None
    path = user_target_dir(event) / PARTIAL_PARSE_FILE
    try:
        fresh = path.stat().st_mtime >= event.dbt.started_utc.timestamp() - 1
    except OSError:
        return None
    return path if fresh else None

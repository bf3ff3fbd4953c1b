"""Database snapshots: the user's DuckDB file copied once per incident, then once per candidate.

The user's database is only ever read as bytes. It is never opened with DuckDB, which would
take a write lock (and could replay its WAL into it). Copy it after the user's dbt has exited,
so the file and its WAL are consistent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from patchit.errors import BadInputError, HarnessError


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

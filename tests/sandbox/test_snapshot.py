"""Snapshots copy bytes; the user's database is never opened."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from patchit.errors import BadInputError, HarnessError
from patchit.sandbox.snapshot import (
    copy_for_candidate,
    read_parse_mode,
    snapshot_database,
    wal_path,
)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_snapshot_copies_database_and_wal(shop_repo: Path, tmp_path: Path) -> None:
    db = shop_repo / "shop.duckdb"
    wal_path(db).write_bytes(b"pretend wal frames")
    before = (digest(db), db.stat().st_mtime_ns)

    snap = snapshot_database(db, tmp_path / "snap")
    assert snap == tmp_path / "snap" / "shop.duckdb"
    assert digest(snap) == before[0]
    assert wal_path(snap).read_bytes() == b"pretend wal frames"
    assert (digest(db), db.stat().st_mtime_ns) == before

    wal_path(db).unlink()
    candidate = copy_for_candidate(snapshot_database(db, tmp_path / "snap2"), tmp_path / "c1")
    assert candidate.name == "shop.duckdb"
    assert not wal_path(candidate).exists()
    with duckdb.connect(str(candidate)) as con:  # the copy is a working database
        rows = con.execute("select count(*) from main.orders").fetchone()
    assert rows is not None and rows[0] > 0


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"nope\.duckdb"):
        snapshot_database(tmp_path / "nope.duckdb", tmp_path / "snap")
    with pytest.raises(HarnessError, match="missing"):
        copy_for_candidate(tmp_path / "snap" / "nope.duckdb", tmp_path / "c1")


def test_read_parse_mode(tmp_path: Path) -> None:
    assert read_parse_mode(tmp_path) == "unknown"
    log = tmp_path / "dbt.log"
    log.write_text(
        "[debug] Partial parsing enabled: 0 files deleted, 0 files added, 1 files changed.\n"
    )
    assert read_parse_mode(tmp_path) == "partial"
    log.write_text("[info] Unable to do partial parsing because profile has changed\n")
    assert read_parse_mode(tmp_path) == "full: profile has changed"

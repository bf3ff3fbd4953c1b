"""A damaged, emptied or locked spool loses no event: producers write to the fallback file, the
worker moves a damaged spool aside with a timestamp (one line says so) and imports the
fallback file exactly once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchit.intake import spool as spool_module
from patchit.intake.spool import (
    FALLBACK_NAME,
    IMPORTING_MARK,
    Spool,
    append_fallback,
    fallback_path,
    spool_event,
    spool_path,
)
from patchit.integrations.airflow import make_failure_callback
from patchit.state.dbfiles import quarantined
from patchit.worker.worker import Worker
from tests.test_worker import OUTAGE, airflow_event


def events(n: int) -> list[dict[str, Any]]:
    return [airflow_event(f"dag_{i}", "t", "OperationalError", OUTAGE) for i in range(n)]


def damage(home: Path, data: bytes) -> Path:
    path = spool_path(home)
    for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        sidecar.unlink(missing_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "data", [b"", b"\x00garbage, not a database\n" * 300], ids=["0-byte", "garbage"]
)
def test_a_damaged_spool_is_moved_aside_and_new_failures_are_kept(
    data: bytes, _patchit_home: Path
) -> None:
    with Spool.open(_patchit_home) as s:
        s.put_many(events(40))
    path = damage(_patchit_home, data)
    # the producer neither recreates it empty nor drops the event
    assert spool_event(events(1)[0], _patchit_home) is None
    assert path.read_bytes() == data
    assert len(fallback_path(_patchit_home).read_text().splitlines()) == 1
    lines: list[str] = []
    stats = Worker(_patchit_home, say=lines.append).run(once=True)
    [moved] = quarantined(path)
    assert moved.read_bytes() == data and moved.name.startswith("spool.sqlite3.corrupt-2")
    damaged = [line for line in lines if "was damaged" in line]
    assert len(damaged) == 1 and str(moved) in damaged[0], lines
    assert stats.processed == 1  # the fallback event, imported into the new spool
    assert not fallback_path(_patchit_home).exists()
    with Spool.open(_patchit_home) as s:
        assert s.counts() == {"done": 1}


def test_the_worker_cli_on_a_damaged_spool_says_one_line_not_a_traceback(
    _patchit_home: Path,
) -> None:
    Spool.open(_patchit_home).close()
    damage(_patchit_home, b"SQLite format 3\x00" + b"\xff" * 8000)
    cmd = [sys.executable, "-m", "patchit", "worker", "--once"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert first.stderr.count("was damaged") == 1
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "damaged" not in second.stderr  # said once, when found
    assert len(quarantined(spool_path(_patchit_home))) == 1


def test_a_locked_spool_sends_the_event_to_the_fallback_file(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "PRODUCER_BUSY_TIMEOUT_S", 0.2)
    Spool.open(_patchit_home).close()
    holder = sqlite3.connect(str(spool_path(_patchit_home)), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        callback = make_failure_callback(home=_patchit_home)
        callback({"exception": KeyError("amout"), "run_id": "r1"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(fallback_path(_patchit_home).read_text().splitlines()) == 1
    stats = Worker(_patchit_home).run(once=True)
    assert (stats.processed, stats.bad) == (1, 0)


def test_the_callback_on_a_damaged_spool_keeps_the_event(_patchit_home: Path) -> None:
    Spool.open(_patchit_home).close()
    damage(_patchit_home, b"")
    make_failure_callback(home=_patchit_home)({"exception": KeyError("amout")})
    assert fallback_path(_patchit_home).is_file()
    assert spool_path(_patchit_home).read_bytes() == b""  # left for the worker to move aside


def test_the_fallback_file_is_imported_exactly_once(_patchit_home: Path) -> None:
    for event in events(3):
        append_fallback(event, _patchit_home)
    with Spool.open(_patchit_home) as s:
        assert s.import_fallback() == 3
        assert s.import_fallback() == 0
        # a worker killed after the import committed, before it removed the file
        [record] = s.conn.execute("select name from spool_imports").fetchall()
        leftover = fallback_path(_patchit_home).with_name(record[0])
        leftover.write_text("".join(f'{{"source": "airflow", "n": {i}}}\n' for i in range(3)))
        assert s.import_fallback() == 0 and not leftover.exists()
        assert s.counts() == {"pending": 3}


def test_a_torn_fallback_line_is_kept_as_a_bad_row(_patchit_home: Path) -> None:
    append_fallback(events(1)[0], _patchit_home)
    with fallback_path(_patchit_home).open("ab") as handle:
        handle.write(b'{"source": "airflow", "unit_id": "cut sh')  # the producer was killed
    with Spool.open(_patchit_home) as s:
        assert s.import_fallback() == 2
        [bad] = s.rows("bad")
    assert "unreadable" in bad["reason"] and "cut sh" in bad["payload"]


def _append_many(home: str, start: int) -> None:
    for i in range(start, start + 200):
        append_fallback({"source": "airflow", "n": i}, Path(home))


def test_producers_racing_the_importer_lose_nothing(_patchit_home: Path) -> None:
    ctx = mp.get_context("fork")
    producers = [
        ctx.Process(target=_append_many, args=(str(_patchit_home), k * 1000)) for k in range(4)
    ]
    for proc in producers:
        proc.start()
    imported = 0
    with Spool.open(_patchit_home) as s:
        while any(p.is_alive() for p in producers):
            imported += s.import_fallback()
        for proc in producers:
            proc.join(30)
        imported += s.import_fallback()
        payloads = [r["payload"] for r in s.rows()]
    assert imported == len(payloads) == 800
    assert len(set(payloads)) == 800
    leftovers = list(_patchit_home.glob(f"spool/{FALLBACK_NAME}{IMPORTING_MARK}*"))
    assert leftovers == []

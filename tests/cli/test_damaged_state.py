"""`patchit incidents` says when the memory or the spool was found damaged and moved aside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from patchit.intake.spool import Spool, spool_path
from patchit.memory import Memory
from patchit.worker.worker import Worker
from tests.memory.test_store import event


def incidents() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchit", "incidents"], capture_output=True, text=True, timeout=60
    )


def zero(path: Path) -> None:
    for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        sidecar.unlink(missing_ok=True)
    path.write_bytes(b"")


def test_incidents_says_the_memory_was_damaged_when_found_and_afterwards(
    _patchit_home: Path,
) -> None:
    with Memory.open(_patchit_home) as mem:
        for i in range(3):
            mem.create_incident(event(f"m{i}"), "fp", f"ck{i}")
    zero(_patchit_home / "memory" / "attempts.sqlite3")
    first = incidents()
    assert first.returncode == 0 and first.stdout.strip() == "no incidents"
    [line] = first.stderr.splitlines()
    assert "attempts.sqlite3 was damaged (0 bytes): moved to" in line
    second = incidents()
    [note] = second.stderr.splitlines()
    assert "moved aside to" in note and "incidents it held are not listed" in note


def test_incidents_says_the_spool_was_damaged(_patchit_home: Path) -> None:
    with Spool.open(_patchit_home) as s:
        s.put({"source": "airflow"})
    zero(spool_path(_patchit_home))
    Worker(_patchit_home).run(once=True)
    result = incidents()
    [note] = result.stderr.splitlines()
    assert "the spool was found damaged and moved aside to" in note
    assert "spooled events it held" in note

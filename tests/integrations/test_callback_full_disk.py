"""The Airflow callback on a full disk: the kernel refuses the spool and its fallback file
(ENOSPC on a real, filled tmpfs; EFBIG under a file-size rlimit in a child). The callback
never raises, tries a few times, says on stderr in one line that the failure could not be kept
and where it would have gone, leaves no torn line behind, holds the event in memory, and spools
it with the next failure once there is room again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.intake.spool import Spool, fallback_path, spool_path
from patchit.integrations import airflow_keep
from patchit.integrations.airflow import make_failure_callback
from tests.full_disk import fill, mount_tmpfs


class FakeTI:
    dag_id = "orders_daily"
    run_id = "scheduled__2026-11-25T00:00:00+00:00"
    try_number = 1
    map_index = -1

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id


def context(task_id: str) -> dict[str, Any]:
    return {"ti": FakeTI(task_id), "exception": ValueError(f"{task_id} broke")}


@pytest.fixture
def held() -> Iterator[None]:
    """Each test starts and ends with nothing held in this process."""
    airflow_keep._held.clear()
    yield
    airflow_keep._held.clear()


def test_a_full_disk_keeps_the_event_in_memory_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], held: None
) -> None:
    with mount_tmpfs(tmp_path / "disk", 512) as disk:
        if disk is None:
            pytest.skip(
                "machine feature: a tmpfs mount needs root (CI runs as root); "
                "nothing to install. The rlimit test below runs everywhere"
            )
        home = disk / "home"
        (home / "spool").mkdir(parents=True)
        filler = fill(disk)
        callback = make_failure_callback(home=home, capture_locals=False)
        started = time.monotonic()
        callback(context("load_orders"))  # must not raise
        elapsed = time.monotonic() - started
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith("patchit: could not keep the failure of orders_daily.load_orders")
        assert (
            "No space left on device" in line and f"after {airflow_keep.KEEP_TRIES} tries" in line
        )
        assert str(spool_path(home)) in line and str(fallback_path(home)) in line
        assert elapsed < 3.0
        # nothing half-written: no torn line in the fallback file
        fallback = fallback_path(home)
        assert not fallback.exists() or fallback.read_bytes() == b""
        assert [e["unit_id"] for e in airflow_keep.held_events()] == ["load_orders"]

        filler.unlink()  # room again: the next failure hands over both, oldest first
        callback(context("publish"))
        assert capsys.readouterr().err == ""
        assert airflow_keep.held_events() == []
        with Spool.open(home) as spool:
            rows = [json.loads(r["payload"])["unit_id"] for r in spool.rows()]
        lines = fallback.read_text().splitlines() if fallback.exists() else []
        kept = rows + [json.loads(x)["unit_id"] for x in lines]
    assert kept == ["load_orders", "publish"]


CHILD = """
import json, resource, signal, sys
from patchit.integrations import airflow_keep
from patchit.integrations.airflow import make_failure_callback

class TI:
    dag_id, task_id, run_id, try_number, map_index = "orders_daily", "load_orders", "r1", 1, -1

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal, as servers set it
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # not one byte more in any file
make_failure_callback(home=sys.argv[1], capture_locals=False)(
    {"ti": TI(), "exception": ValueError("x")})
print(json.dumps([e["unit_id"] for e in airflow_keep.held_events()]))
"""


def test_a_file_size_limit_is_survived_the_same_way(tmp_path: Path, held: None) -> None:
    home = tmp_path / "home"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(home)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["load_orders"]
    [line] = proc.stderr.splitlines()
    assert line.startswith("patchit: could not keep the failure of orders_daily.load_orders")
    assert "File too large" in line and str(fallback_path(home)) in line
    fallback = fallback_path(home)
    assert not fallback.exists() or fallback.read_bytes() == b""  # nothing half-written

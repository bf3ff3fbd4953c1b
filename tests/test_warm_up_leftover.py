"""A warm dbt worker's warm-up saves its parse under `sandboxes/` and its parent moves it into
the cache; a parent killed in between left the file there for good (`make fault`, 100 kills:
`left: sandboxes/dbt-warm-up-779-1abc9574.msgpack`). The file is named after its process now,
and the next run's recovery sweep removes those of processes that are gone, never a live one's.
Real SQLite memory, a real dead pid."""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchit.loop.recovery import sweep_dead_runs
from patchit.memory import Memory
from patchit.state.liveness import run_owner


def dead_pid_owner() -> str:
    """The owner id of a process of this host that ended (its pid is free)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return run_owner(gone.pid)


def test_a_warm_up_parse_left_by_a_killed_run_is_swept(_patchit_home: Path) -> None:
    sandboxes = _patchit_home / "sandboxes"
    sandboxes.mkdir(parents=True)
    left = sandboxes / f"dbt-warm-up-{dead_pid_owner()}-1abc9574.msgpack"
    live = sandboxes / f"dbt-warm-up-{run_owner()}-2bcd0685.msgpack"
    for path in (left, live):
        path.write_bytes(b"\x81\xa1a\x01")
    with Memory.open(_patchit_home) as memory:
        sweep = sweep_dead_runs(_patchit_home, memory, "sweeper")
    assert not left.exists()
    assert live.exists()  # a live run's: it moves it itself
    assert sweep.sandboxes == 1

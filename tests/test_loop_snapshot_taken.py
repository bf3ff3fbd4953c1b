"""The loop tells a harness that reads the incident's snapshot ahead that it is made (fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patchit.errors import HarnessError
from patchit.loop.loop import _snapshot_taken


class _Reads:
    def __init__(self) -> None:
        self.told: list[Path] = []

    def snapshot_taken(self, snapshot: Path) -> None:
        self.told.append(snapshot)


class _DoesNot:
    pass


def test_a_harness_that_reads_the_snapshot_ahead_is_told(tmp_path: Path) -> None:
    reads: Any = _Reads()
    _snapshot_taken(reads, tmp_path / "shop.duckdb")
    _snapshot_taken(reads, None)  # no snapshot: nothing to tell
    assert reads.told == [tmp_path / "shop.duckdb"]
    does_not: Any = _DoesNot()
    _snapshot_taken(does_not, tmp_path / "shop.duckdb")
    _snapshot_taken(HarnessError("no harness"), tmp_path / "shop.duckdb")

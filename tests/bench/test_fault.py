"""Fault injection on real heals: a worker healing a real dbt failure is SIGKILLed three times
(twice by a random timer, once right after a fix verified and before it landed), resumed each
time, and nothing is lost. `make fault` does the same with 100 kills."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.bench.fault import run_fault

pytestmark = pytest.mark.slow  # real dbt builds and heals, killed and resumed


def test_three_kills_lose_nothing(tmp_path: Path) -> None:
    result = run_fault(tmp_path, kills=3, checkpoint_every=3, seed=7, say=lambda _m: None)
    assert result.kills == 3 and result.checkpoint_kills == {"verified": 1}
    assert result.lost() == [], result.summary()
    assert (result.corrupt_databases, result.stray_worktrees, result.stray_dirs) == (0, 0, 0)
    assert (result.lost_incidents, result.lost_verified_fixes, result.touched_user_trees) == (
        0, 0, 0,
    )  # fmt: skip

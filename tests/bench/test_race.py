"""Racing workers: 4 worker processes x 200 spooled events heal each incident exactly once.

The full count (4 x 1,000) is `make race`. The runtime is the library's FakeHarness; the git
repositories, the failing jobs, the fix-it, the spool and the memory are real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.bench.race import run_race

pytestmark = pytest.mark.slow  # four worker processes for ~20 s (no dbt or Airflow)


def test_four_workers_heal_each_incident_once(tmp_path: Path) -> None:
    result = run_race(tmp_path, workers=4, events=200, causes=10, say=lambda _m: None)
    assert result.lost() == []
    assert result.spool == {"done": 200}
    assert result.incidents == {"fixed": 10}
    assert set(result.verified_per_incident.values()) == {1}
    assert set(result.branches_per_repo.values()) == {1}
    assert result.busy_errors == 0 and result.exit_codes == [0, 0, 0, 0]

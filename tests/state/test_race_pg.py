"""4 worker processes x 1,000 spooled events on one Postgres state heal each incident once.

The same race as `tests/bench/test_race.py` (real git repositories, failing jobs, fix-it and
branches; the library's FakeHarness as the runtime), with the spool and the memory in a fresh
Postgres database named by the race's `$PATCHIT_HOME/patchit.toml`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.bench.race import run_race

pytestmark = pytest.mark.slow  # four worker processes for ~40 s, and a Postgres cluster


def test_four_workers_on_one_postgres_state_heal_each_incident_once(
    tmp_path: Path, state_url: str
) -> None:
    result = run_race(tmp_path, workers=4, events=1000, causes=20, say=lambda _m: None,
                      state_url=state_url)  # fmt: skip
    assert result.lost() == []
    assert result.backend == "postgres"
    assert result.spool == {"done": 1000}
    assert result.events_in_memory == 1000
    assert result.incidents == {"fixed": 20}
    assert set(result.verified_per_incident.values()) == {1}
    assert set(result.branches_per_repo.values()) == {1}
    assert result.busy_errors == 0 and result.exit_codes == [0, 0, 0, 0]
    assert not (tmp_path / "home" / "memory" / "attempts.sqlite3").exists()

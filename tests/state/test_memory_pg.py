"""The attempt memory's own tests, run again with the memory on Postgres.

The tests below are the SQLite modules' tests that go through the `memory` fixture (which
`tests/state/conftest.py` overrides with a memory on a fresh Postgres database), and the
racing-process tests, which open `Memory.open(home)` with `pg_home`'s PATCHIT_STATE_URL in
their environment: six processes open one incident per cause, one of them heals it, and a
fresh database is migrated once. The SQLite-file tests (damage, WAL, killed writers, locked
files) stay SQLite-only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.memory import test_concurrency
from tests.memory.test_ledger import (  # noqa: F401
    test_day_totals_are_per_utc_day_over_all_incidents,
    test_failed_streak,
    test_history_carries_the_verification_output,
    test_record_and_read_back,
)
from tests.memory.test_store import (  # noqa: F401
    test_a_screened_out_diff_is_seen_but_spends_no_attempt_and_bars_no_bucket,
    test_a_storm_attaches_in_one_batch_and_redelivery_is_ignored,
    test_attempts_are_recorded_and_queried_per_fingerprint,
    test_create_incident_stores_the_event,
    test_last_good_commit,
    test_leases_keep_a_second_worker_out,
    test_open_or_attach_groups_by_cause_and_repo,
    test_recurrence_after_the_window_opens_a_new_incident,
    test_the_same_event_delivered_twice_is_stored_once,
    test_update_get_and_list_incidents,
)


@pytest.mark.usefixtures("pg_home")
def test_racing_workers_open_one_incident_and_one_of_them_heals_it(tmp_path: Path) -> None:
    test_concurrency.test_racing_workers_open_one_incident_and_one_of_them_heals_it(tmp_path)
    assert not list(tmp_path.rglob("*.sqlite3"))  # they raced on Postgres


@pytest.mark.usefixtures("pg_home")
def test_racing_workers_on_a_fresh_database_migrate_it_once(tmp_path: Path) -> None:
    test_concurrency.test_racing_workers_on_a_fresh_file_migrate_it_once(tmp_path)
    assert not list(tmp_path.rglob("*.sqlite3"))


def test_an_event_with_nul_characters_is_stored_and_read_on_postgres(pg_home: Path) -> None:
    """SQLite keeps a NUL; Postgres text cannot (a raw one) and jsonb cannot (`\\u0000`): the
    event is stored, its commits read, its incident's fields written, with no crash loop."""
    from patchit.memory import Memory
    from tests.memory.test_store import event

    nul = event(error_message="bad byte \x00 in row", commit="a" * 40)
    with Memory.open(pg_home) as memory:
        incident, created = memory.open_or_attach(nul, "fp\x00", "ck\x00")
        assert created
        assert memory.event_commits(incident.id) == {"a" * 40}
        assert memory.has_event_from(incident.id, "a" * 40)
        assert not memory.has_event_from(incident.id, "b" * 40)
        assert memory.events_for(incident.id)[0].error_message == "bad byte \x00 in row"
        updated = memory.update_incident(incident.id, summary="a \x00 summary")
        assert updated.summary == "a \ufffd summary"

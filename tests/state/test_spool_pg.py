"""The spool on Postgres: the SQLite spool's row life, and claims under row locks that skip
each other (`FOR UPDATE SKIP LOCKED`) instead of waiting or taking a row twice."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg2
import pytest

from patchit.doctor.doctor import check_state
from patchit.intake.spool import MAX_CLAIMS, Spool, append_fallback, spool_event, spool_events
from patchit.memory import Memory


def test_put_claim_done_bad_and_release(pg_home: Path) -> None:
    row = spool_event({"source": "airflow", "unit_id": "t"}, pg_home)
    assert row is not None
    assert not (pg_home / "spool" / "spool.sqlite3").exists()  # no SQLite spool beside it
    with Spool.open(pg_home) as spool:
        assert spool.where.startswith("postgresql://")
        second = spool.put({"source": "airflow", "unit_id": "u"})
        claimed = spool.claim("w1", limit=10)
        assert [c.id for c in claimed] == [row, second]
        assert claimed[0].data()["unit_id"] == "t" and claimed[0].claims == 0
        assert spool.claim("w2", limit=10) == []  # taken rows are not handed out twice
        spool.charge([second])  # a death counts against a row only while it is processed
        spool.refund([second])
        spool.release([second])
        [again] = spool.claim("w2", limit=10)
        assert again.id == second and again.claims == 0  # neither a claim nor a release counts
        spool.mark_done(row)
        spool.mark_bad(second, "does not match the event schema")
        assert spool.counts() == {"done": 1, "bad": 1}
        [bad] = spool.rows("bad")
        assert bad["reason"] == "does not match the event schema"
        assert spool.retry() == 1 and spool.counts() == {"done": 1, "pending": 1}
        assert spool.drop(state="done") == 1


def test_expired_lease_and_dead_owner_are_claimed_again(pg_home: Path) -> None:
    with Spool.open(pg_home) as spool:
        first_id = spool.put({"source": "dbt"})
        second_id = spool.put({"source": "dbt"})
        spool.claim("dead-host:1", limit=1)
        spool.claim("live-host:2", limit=1)
        assert spool.claim("w2", lease_s=3600) == []
        requeued = spool.claim("w2", is_dead=lambda owner: owner.startswith("dead"))
        assert [(r.id, r.claims) for r in requeued] == [(first_id, 0)]
        expired = spool.claim("w3", lease_s=0)  # every lease ran out
        assert [row.id for row in expired] == [first_id, second_id]


def test_a_row_whose_workers_keep_dying_is_marked_bad(pg_home: Path) -> None:
    with Spool.open(pg_home) as spool:
        spool.put({"source": "dbt"})
        for _ in range(MAX_CLAIMS):  # each worker dies while processing it
            [row] = spool.claim("w", lease_s=0)
            spool.charge([row.id])
        assert spool.claim("w", lease_s=0) == []
        [bad] = spool.rows("bad")
        assert f"died {MAX_CLAIMS} times while processing it" in bad["reason"]


def test_a_claim_skips_rows_another_connection_holds(pg_home: Path, state_url: str) -> None:
    with Spool.open(pg_home) as spool:
        ids = [spool.put({"source": "dbt", "n": n}) for n in range(4)]
    holder = psycopg2.connect(state_url)  # another worker, in the middle of its claim
    try:
        with holder.cursor() as cur:
            cur.execute("select id from spool order by id limit 2 for update")
        with Spool.open(pg_home, busy_timeout_s=30) as spool:
            began = time.monotonic()
            taken = spool.claim("w2", limit=10)
            assert time.monotonic() - began < 5  # skipped, not waited for
            assert [row.id for row in taken] == ids[2:]
            holder.rollback()  # the other claim gave up: its rows are free again
            assert [row.id for row in spool.claim("w2", limit=10)] == ids[:2]
    finally:
        holder.close()


def test_racing_claimers_take_every_row_once(pg_home: Path) -> None:
    with Spool.open(pg_home) as spool:
        spool.put_many([{"source": "dbt", "n": n} for n in range(300)])
    taken: dict[str, list[int]] = {}

    def claimer(name: str) -> None:
        with Spool.open(pg_home) as mine:
            got = taken.setdefault(name, [])
            while rows := mine.claim(name, limit=7):
                got += [row.id for row in rows]

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    every = [row for rows in taken.values() for row in rows]
    assert len(every) == 300 and len(set(every)) == 300
    with Spool.open(pg_home) as spool:
        assert spool.counts() == {"taken": 300}


def test_the_fallback_file_is_imported_into_postgres_once(pg_home: Path) -> None:
    append_fallback({"source": "airflow", "unit_id": "down"}, pg_home)
    (pg_home / "spool" / "fallback.jsonl").open("a").write("not json\n")
    with Spool.open(pg_home) as spool:
        assert spool.import_fallback() == 2
        assert spool.import_fallback() == 0
        assert spool.counts() == {"pending": 1, "bad": 1}


def test_the_airflow_callback_spools_into_postgres(pg_home: Path) -> None:
    from patchit.integrations.airflow import make_failure_callback

    make_failure_callback()({"exception": KeyError("amout")})
    assert not (pg_home / "spool" / "fallback.jsonl").exists()
    with Spool.open(pg_home) as spool:
        [row] = spool.rows()
    assert row["state"] == "pending" and '"error_type": "KeyError"' in row["payload"]


def test_doctor_reports_a_reachable_state(pg_home: Path) -> None:
    first = check_state(pg_home)
    assert first.status == "ok" and "reachable" in first.detail
    assert "tables created by the first worker" in first.detail
    Spool.open(pg_home).close()
    Memory.open(pg_home).close()
    assert "tables present" in check_state(pg_home).detail


def test_the_callback_falls_back_when_the_server_stalls_after_login(
    pg_home: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server (or pgbouncer) that accepts the login and then never answers: the producer
    gives up within its deadline and the event is in the fallback file, not lost."""
    from tests.state.stall_proxy import stalling_proxy

    url = urlsplit(state_url)
    with stalling_proxy(url.hostname or "", url.port or 5432) as port:
        monkeypatch.setenv(
            "PATCHIT_STATE_URL", url._replace(netloc=f"{url.username}@127.0.0.1:{port}").geturl()
        )
        returned: list[object] = []
        began = time.monotonic()
        producer = threading.Thread(
            target=lambda: returned.append(
                spool_event({"source": "airflow", "unit_id": "s"}, pg_home)
            ),
            daemon=True,
        )
        producer.start()
        producer.join(10)
        took = time.monotonic() - began
        assert returned == [None] and took < 3.5
        began = time.monotonic()  # a batch (patchit airflow scan) the same
        batch = threading.Thread(
            target=lambda: returned.append(spool_events([{"source": "airflow"}] * 2, pg_home)),
            daemon=True,
        )
        batch.start()
        batch.join(10)
        assert returned == [None, False] and time.monotonic() - began < 3.5
    lines = (pg_home / "spool" / "fallback.jsonl").read_text().splitlines()
    assert [json.loads(line).get("unit_id") for line in lines] == ["s", None, None]

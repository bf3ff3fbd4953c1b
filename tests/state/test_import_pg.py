"""`patchit state import`: a SQLite state made by patchit's own worker (the race's real heals,
FakeHarness as the runtime) copied into a real Postgres state, once, all or nothing, with the
SQLite files left as they were."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchit.bench.race import make_cause, run_race
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.memory.ledger import Ledger

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _patchit(home: Path, *args: str, url: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PATCHIT_STATE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    if url is not None:
        env["PATCHIT_STATE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "patchit", "--home", str(home), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def _fingerprint(home: Path) -> dict[str, str]:
    """Every file under `home` with its sha256: what "untouched" means."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def _incidents(home: Path, url: str | None) -> list[dict[str, object]]:
    done = _patchit(home, "incidents", "--json", url=url)
    assert done.returncode == 0, done.stderr
    keys = ("id", "fingerprint", "status", "classification", "branch", "attempts", "events")
    return sorted(({k: i[k] for k in keys} for i in json.loads(done.stdout)), key=str)


def _pg_memory(url: str) -> Memory:
    return Memory.on_postgres(url, Path("unused"))


def _pg_spool(url: str) -> Spool:
    return Spool.on_postgres(url, Path("unused"), 30.0)


def _old_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A one-worker SQLite state: healed incidents, the LLM ledger, a last good commit, unit
    runs, and events still waiting in the spool."""
    monkeypatch.delenv("PATCHIT_STATE_URL", raising=False)
    work = tmp_path / "old"
    result = run_race(work, workers=1, events=12, causes=3, say=lambda _m: None)
    assert result.incidents == {"fixed": 3}, result.summary()
    home = work / "home"
    with Memory.open(home) as memory:
        first = memory.list_incidents()[0].id
        Ledger(memory).record(first, "propose", 1, "claude-x", tokens_in=10, tokens_out=5)
        memory.record_last_good("shop:models", "abc123")
    waiting = make_cause(tmp_path / "more", 7).model_dump(mode="json")
    with Spool.open(home) as spool:
        spool.put(waiting)
        spool.put({**waiting, "event_id": "another"})
    return home


def test_state_import_copies_once_and_leaves_the_sqlite_files_alone(
    tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _old_state(tmp_path, monkeypatch)
    new = tmp_path / "new"
    listed = _incidents(old, None)
    before = _fingerprint(old)

    done = _patchit(new, "state", "import", "--from", str(old), url=state_url)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert "imported 3 incidents, 12 events" in line and "1 llm_calls" in line, line
    assert "1 last_good" in line and "2 spool" in line, line
    assert _incidents(new, state_url) == listed
    with _pg_spool(state_url) as spool, _pg_memory(state_url) as memory:
        assert spool.counts() == {"pending": 2}
        assert memory.last_good("shop:models") == "abc123"
        assert [r["n"] for r in memory.db.query("select count(*) as n from llm_calls")] == [1]

    again = _patchit(new, "state", "import", "--from", str(old), url=state_url)
    assert again.returncode == 0, again.stderr
    assert "imported nothing; " in again.stdout and "already there" in again.stdout
    assert _incidents(new, state_url) == listed
    with _pg_spool(state_url) as spool:
        assert spool.counts() == {"pending": 2}
    assert _fingerprint(old) == before  # not a byte written, no file added

    # Postgres holds other data under a key the SQLite state uses: refused, nothing written,
    # not even the rows before the conflict (a new incident, a new spooled event)
    with _pg_memory(state_url) as memory:
        memory.record_last_good("shop:models", "fff999")
    with Memory.open(old) as memory:
        memory.create_incident(make_cause(tmp_path / "late", 9), "fp-late", "cause-late")
    with Spool.open(old) as spool:
        spool.put({"event_id": "late"})
    refused = _patchit(new, "state", "import", "--from", str(old), url=state_url)
    assert refused.returncode == 2, refused.stdout
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "last_good project_key 'shop:models' is already there with other values" in lines[0]
    assert "(commit, updated_utc)" in lines[0] and "nothing was written" in lines[0]
    assert len(_incidents(new, state_url)) == 3
    with _pg_spool(state_url) as spool:
        assert spool.counts() == {"pending": 2}


def test_state_import_bad_input_is_one_line(tmp_path: Path, state_url: str) -> None:
    missing = _patchit(tmp_path / "new", "state", "import", "--from", str(tmp_path / "nope"),
                       url=state_url)  # fmt: skip
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1
    assert "--from" in missing.stderr and "no such file or directory" in missing.stderr
    garbage = tmp_path / "attempts.sqlite3"
    garbage.write_text("not a database")
    bad = _patchit(tmp_path / "new", "state", "import", "--from", str(garbage), url=state_url)
    assert bad.returncode == 2 and "not a readable patchit memory" in bad.stderr
    assert garbage.read_text() == "not a database"
    (tmp_path / "old" / "memory").mkdir(parents=True)
    nowhere = _patchit(tmp_path / "new", "state", "import", "--from", str(tmp_path / "old"),
                       url=None)  # fmt: skip
    assert nowhere.returncode == 2
    assert "no Postgres state to import into" in nowhere.stderr


def test_an_older_patchits_memory_is_migrated_on_a_copy(tmp_path: Path, state_url: str) -> None:
    import sqlite3
    from datetime import UTC, datetime

    from sqlite_utils import Database

    from patchit.memory.migrations import MIGRATIONS

    old = tmp_path / "attempts.sqlite3"
    db = Database(sqlite3.connect(str(old)))
    db.table("_migrations").create({"id": int, "name": str, "applied_utc": str}, pk="id")
    for number, migration in enumerate(MIGRATIONS[:7], start=1):  # before repo_url
        migration(db)
        db.table("_migrations").insert({"id": number, "name": migration.__name__,
                                        "applied_utc": datetime.now(UTC).isoformat()})  # fmt: skip
    now = datetime.now(UTC).isoformat()
    row = {"id": "20260101-abcdef", "fingerprint": "fp", "cause_key": "ck", "status": "failed"}
    db.table("incidents").insert({**row, "created_utc": now, "updated_utc": now})
    db.conn.close()
    before = old.read_bytes()
    done = _patchit(tmp_path / "new", "state", "import", "--from", str(old), url=state_url)
    assert done.returncode == 0, done.stderr
    assert "imported 1 incidents" in done.stdout
    assert old.read_bytes() == before  # and no -wal or -shm beside it
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "new") == ["attempts.sqlite3"]
    [incident] = _incidents(tmp_path / "new", state_url)
    assert incident["id"] == "20260101-abcdef" and incident["status"] == "failed"


def test_events_in_the_old_homes_fallback_file_refuse_the_import_until_spooled(
    tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events a producer wrote to the fallback file are in no SQLite file: an import that
    skipped them would lose them, and one that copied them could not be exactly once. The
    import is refused in one line, nothing written, until the old worker spooled them."""
    from patchit.intake.spool_files import append_fallback

    monkeypatch.delenv("PATCHIT_STATE_URL", raising=False)
    old, new = tmp_path / "old", tmp_path / "new"
    with Memory.open(old), Spool.open(old) as spool:
        spool.put({"event_id": "spooled"})
    append_fallback({"event_id": "fell-back"}, old)
    before = _fingerprint(old)
    for dry in ((), ("--dry-run",)):
        refused = _patchit(new, "state", "import", "--from", str(old), *dry, url=state_url)
        assert refused.returncode == 2, refused.stdout
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, refused.stderr
        assert "1 fallback file(s)" in lines[0] and "fallback.jsonl" in lines[0]
        assert "patchit worker --once" in lines[0] and "nothing was written" in lines[0]
    assert _fingerprint(old) == before
    # what the old worker does first: its fallback file into its spool, exactly once
    with Spool.open(old) as spool:
        assert spool.import_fallback() == 1
    done = _patchit(new, "state", "import", "--from", str(old), url=state_url)
    assert done.returncode == 0, done.stderr
    assert "2 spool" in done.stdout
    with _pg_spool(state_url) as pg:
        payloads = [json.loads(r["payload"])["event_id"] for r in pg.rows()]
    assert sorted(payloads) == ["fell-back", "spooled"]

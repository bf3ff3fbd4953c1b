"""The spool: home resolution in step with patchit.config, claims, bad rows, leases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from patchit.config import resolve_home
from patchit.intake.spool import Spool, resolve_home_stdlib, spool_event, spool_path


@pytest.mark.parametrize(
    ("cli", "env", "xdg"),
    [
        (None, None, None),
        (None, None, "xdg-state"),
        (None, "from-env", "xdg-state"),
        ("from-cli", "from-env", "xdg-state"),
        ("~/tilde-home", None, None),
        (None, "", "xdg-state"),
    ],
)
def test_home_resolution_matches_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: str | None,
    env: str | None,
    xdg: str | None,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for name, value in (("PATCHIT_HOME", env), ("XDG_STATE_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value and str(tmp_path / value))
    cli_home = str(tmp_path / cli) if cli and not cli.startswith("~") else cli
    assert resolve_home_stdlib(cli_home) == resolve_home(cli_home)


def test_put_claim_done_and_bad(tmp_path: Path) -> None:
    row = spool_event({"source": "airflow", "unit_id": "t"}, tmp_path)
    assert spool_path(tmp_path).is_file()
    with Spool.open(tmp_path) as spool:
        second = spool.put({"source": "airflow", "unit_id": "u"})
        claimed = spool.claim("w1", limit=10)
        assert [c.id for c in claimed] == [row, second]
        assert claimed[0].data()["unit_id"] == "t"
        assert spool.claim("w2", limit=10) == []  # taken rows are not handed out twice
        spool.mark_done(row)
        spool.mark_bad(second, "does not match the event schema")
        assert spool.counts() == {"done": 1, "bad": 1}
        [bad] = spool.rows("bad")
        assert bad["reason"] == "does not match the event schema"
        assert bad["payload"]  # kept for inspection


def test_expired_lease_is_claimed_again(tmp_path: Path) -> None:
    with Spool.open(tmp_path) as spool:
        spool.put({"source": "dbt"})
        [first] = spool.claim("dead-worker")
        assert spool.claim("w2", lease_s=3600) == []
        [again] = spool.claim("w2", lease_s=0)
        assert again.id == first.id and again.claims == 0  # a claim counts no death


def test_producer_gives_up_quickly_on_a_locked_spool(tmp_path: Path) -> None:
    Spool.open(tmp_path).close()
    holder = sqlite3.connect(str(spool_path(tmp_path)), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with (
            pytest.raises(sqlite3.OperationalError, match="locked"),
            Spool(spool_path(tmp_path), busy_timeout_s=0.2) as spool,
        ):
            spool.put({"source": "airflow"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Spool.open(tmp_path) as spool:
        assert spool.counts() == {}

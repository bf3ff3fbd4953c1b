"""PgConn and connect on a real server: what a failure leaves behind."""

from __future__ import annotations

import pytest

from patchit.state.pg import PgConn, StateDbError, StateUnavailableError, connect


def test_a_lock_timeout_in_begin_immediate_leaves_the_connection_usable(state_url: str) -> None:
    holder = PgConn(connect(state_url), lock_key=42)
    waiter = PgConn(connect(state_url, lock_timeout_s=0.2), lock_key=42)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StateDbError) as info:
            waiter.execute("BEGIN IMMEDIATE")
        assert info.value.busy and not waiter.in_transaction
        holder.execute("COMMIT")
        waiter.execute("BEGIN IMMEDIATE")
        assert waiter.execute("select 1").fetchone() == (1,)
        waiter.execute("COMMIT")
    finally:
        holder.close()
        waiter.close()


def test_the_timeouts_are_set_at_login_beside_the_urls_own_options(state_url: str) -> None:
    raw = connect(f"{state_url}?options=-c%20search_path%3Dx", lock_timeout_s=0.25,
                  statement_timeout_s=1.5)  # fmt: skip
    try:
        with raw.cursor() as cur:
            got = []
            for name in ("lock_timeout", "statement_timeout", "search_path"):
                cur.execute(f"show {name}")
                got.append(cur.fetchone()[0])
        assert got == ["250ms", "1500ms", "x"]
        assert raw.get_dsn_parameters()["keepalives"] == "1"
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("postgresql://bob:p%zzw0rd@127.0.0.1:1/db", ["p%zzw0rd", "zzw0rd"]),
        ("postgresql://bob:s3cret@[::1/db", ["s3cret"]),
        ("postgresql://bob:s3%2Bcret@[::1/db", ["s3%2Bcret", "s3+cret"]),
        ("postgresql://bob@[::1/db?password=s3cret", ["s3cret"]),
    ],
)
def test_the_password_never_shows_in_a_cannot_connect_line(url: str, secrets: list[str]) -> None:
    with pytest.raises(StateUnavailableError) as info:
        connect(url, connect_timeout_s=1)
    line = str(info.value)
    assert "cannot connect" in line and "***" in line and "\n" not in line
    assert not [s for s in secrets if s in line], line

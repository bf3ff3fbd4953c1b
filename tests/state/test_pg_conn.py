"""PgConn and connect on a real server: what a failure leaves behind."""

from __future__ import annotations

import pytest

from patchit.state.pg import PgConn, StateDbError, connect


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

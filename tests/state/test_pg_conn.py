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

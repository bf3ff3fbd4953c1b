"""The durable spool: failure events waiting for a worker, one SQLite file (or the deployment's
Postgres state), standard library only.

`$PATCHIT_HOME/spool/spool.sqlite3` (WAL). Producers (the Airflow callback, `patchit airflow
scan`) only INSERT a JSON event dict, with a short busy timeout, so they never wait long on a
worker. Workers claim rows inside one `BEGIN IMMEDIATE` transaction, so two workers never take
the same row. A row's life: `pending` -> `taken` -> `done` | `bad` (kept, with the reason, for
inspection; `patchit spool retry` puts it back). A `taken` row whose worker is known to be
dead (`patchit.state.liveness.claimer_is_dead`: its pid, where it means that process) or whose lease
ran out is claimed again; one whose workers died `MAX_CLAIMS` times while processing it is
marked `bad` (it is what kills them). Only the rows being processed when a worker dies count
it (`Spool.charge`), not the rest of its batch.

A producer never drops an event: when the spool is locked past its busy timeout or damaged, the
event is appended to `spool/fallback.jsonl` beside it, which the worker imports (exactly once:
the import and its record commit in one transaction). A damaged spool is moved aside by the
worker (`patchit.state.dbfiles`), never emptied in place.

Nothing reaches the file unredacted: every payload passes through `patchit.text.redaction` (with
the secret-named environment values of the process that writes it), whoever the producer is.

With a state URL (`patchit.state.url`) the same rows live in Postgres (`patchit.intake.spool_pg`:
claims with `FOR UPDATE SKIP LOCKED`); a producer that cannot reach it appends to the fallback
file on its own host, which a worker on that host imports.

The `Spool` class (opening, claims, the rows' life, the fallback import) is in
`patchit.intake.spool_store`, and re-exported here; this module is the producers' side.

This module is imported by the Airflow callback inside the task process: it must import
nothing but the standard library (no pydantic, no patchit.events).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from patchit.intake.spool_files import BAD_AFTER_CLAIMS as BAD_AFTER_CLAIMS
from patchit.intake.spool_files import FALLBACK_NAME as FALLBACK_NAME
from patchit.intake.spool_files import IMPORTING_MARK as IMPORTING_MARK
from patchit.intake.spool_files import MAX_CLAIMS as MAX_CLAIMS
from patchit.intake.spool_files import SPOOL_RELATIVE_PATH as SPOOL_RELATIVE_PATH
from patchit.intake.spool_files import append_fallback as append_fallback
from patchit.intake.spool_files import fallback_path as fallback_path
from patchit.intake.spool_files import spool_path as spool_path
from patchit.intake.spool_files import spool_payload as spool_payload
from patchit.intake.spool_store import WORKER_BUSY_TIMEOUT_S as WORKER_BUSY_TIMEOUT_S
from patchit.intake.spool_store import Spool as Spool
from patchit.intake.spool_store import SpoolConn as SpoolConn
from patchit.intake.spool_store import SpoolDamaged as SpoolDamaged
from patchit.intake.spool_store import SpooledEvent as SpooledEvent
from patchit.intake.spool_store import spool_where as spool_where
from patchit.state.home import resolve_home
from patchit.state.pg import StateDbError, StateUnavailableError
from patchit.state.url import StateUrlError, state_url

T = TypeVar("T")
PRODUCER_BUSY_TIMEOUT_S = 2.0
# a producer's hard deadline on a Postgres state: a server or pooler that accepts and then
# stalls must not block the Airflow task (the event goes to the fallback file instead)
PRODUCER_DEADLINE_S = 2.5
PRODUCER_DEADLINE_PER_EVENT_S = 0.005

resolve_home_stdlib = resolve_home  # the state dir rule, standard library only


# what a producer catches to write the fallback file instead (the spool locked, damaged or
# unwritable, or a Postgres state unreachable); ValueError a backstop (a driver's, a decoder's)
PRODUCER_FAILURES = (
    sqlite3.Error, SpoolDamaged, OSError, StateDbError, StateUnavailableError, StateUrlError,
    ValueError,
)  # fmt: skip


def _within_deadline(home: Path, work: Callable[[], T], deadline_s: float) -> T:
    """`work()`; with a Postgres state, in a daemon thread given `deadline_s` (a producer
    must return: past it StateDbError, and the thread is left to finish or hang)."""
    if state_url(home) is None:
        return work()
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["value"] = work()
        except BaseException as exc:  # handed to the caller
            done["error"] = exc

    thread = threading.Thread(target=run, name="patchit-spool-producer", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        raise StateDbError(f"the state database gave no answer within {deadline_s:g}s", lost=True)
    if "error" in done:
        raise done["error"]
    return cast(T, done["value"])


def _put_many(events: list[dict[str, Any]], home: Path, owner: str | None) -> list[int]:
    with Spool.open(home, PRODUCER_BUSY_TIMEOUT_S, producer=True) as spool:
        return spool.put_many(events, owner)


def _put(event: dict[str, Any], home: Path) -> int:
    with Spool.open(home, PRODUCER_BUSY_TIMEOUT_S, producer=True) as spool:
        return spool.put(event)


def spool_events(events: list[dict[str, Any]], home: Path) -> bool:
    """Spool several events in one transaction; False when they went to the fallback file
    instead (the spool locked past the producer's timeout, damaged or unwritable, or a
    Postgres state silent past the producer's deadline)."""
    return spool_taken(events, home, None) is not None


def spool_taken(events: list[dict[str, Any]], home: Path, owner: str | None) -> list[int] | None:
    """`spool_events`, the rows taken by `owner` (a producer that processes them itself, see
    `Spool.put_many`); their row ids, or None when they went to the fallback file (pending:
    a worker may take them while their producer still runs)."""
    try:
        # a batch (patchit airflow scan) is given more time for its rows
        deadline = PRODUCER_DEADLINE_S + PRODUCER_DEADLINE_PER_EVENT_S * len(events)
        return _within_deadline(home, lambda: _put_many(events, home, owner), deadline)
    except PRODUCER_FAILURES:
        for event in events:
            append_fallback(event, home)
        return None


def spool_event(event: dict[str, Any], home: Path | None = None) -> int | None:
    """Open the spool with the producer's short busy timeout, insert one event, close; its row
    id. When the spool is locked past that timeout, damaged or unwritable, the event goes to
    the fallback file instead (None): an event is never dropped."""
    home = home or resolve_home()
    try:
        return _within_deadline(home, lambda: _put(event, home), PRODUCER_DEADLINE_S)
    except PRODUCER_FAILURES:
        append_fallback(event, home)
        return None

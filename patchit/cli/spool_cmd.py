"""`patchit spool list|retry|drop`: look at and manage the events waiting for the worker.

`retry` and `drop` given row ids act on exactly those rows, or on none: a named row that is not
in the spool, or (for `retry`) that is pending already or taken by a live worker, refuses the
whole command with one line naming it, and nothing is changed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from patchit.errors import BadInputError, SpoolError
from patchit.intake.spool import FALLBACK_NAME, IMPORTING_MARK, Spool, spool_where
from patchit.state.liveness import claimer_judge
from patchit.state.pg import StateDbError

STATES = ("pending", "taken", "done", "bad")
ROW_ID = click.IntRange(1, 2**63 - 1)  # a spool row id: what SQLite and Postgres can hold


@contextmanager
def _open(ctx: click.Context) -> Iterator[Spool]:
    """The spool (checked, a damaged one moved aside and said), its errors as one line."""
    from patchit.config import resolve_home

    home = resolve_home(ctx.obj.get("home") if ctx.obj else None)
    try:
        with Spool.open(home, check=True) as spool:
            for notice in spool.notices:
                click.echo(f"patchit: {notice}", err=True)
            yield spool
    except (sqlite3.Error, StateDbError) as exc:
        raise SpoolError(f"{spool_where(home)}: the spool could not be used ({exc})") from exc


def _what(payload: str) -> str:
    """`pipeline.unit: ErrorType` of a spooled event, as far as its payload can be read."""
    try:
        data: Any = json.loads(payload)
    except (ValueError, RecursionError):  # a bad row holds what could not be read, as it was
        return "(not JSON)"
    if not isinstance(data, dict):
        return "(not an event)"
    unit = ".".join(str(data[k]) for k in ("pipeline_id", "unit_id") if data.get(k))
    return f"{unit or '?'}: {data.get('error_type') or '?'}"


def _waiting_in_fallback(spool: Spool) -> int:
    files = [spool.path.with_name(FALLBACK_NAME)]
    files += sorted(spool.path.parent.glob(f"{FALLBACK_NAME}{IMPORTING_MARK}*"))
    count = 0
    for path in files:
        try:
            count += sum(1 for line in path.read_bytes().splitlines() if line.strip())
        except OSError:
            continue
    return count


@click.group("spool")
def spool() -> None:
    """List, retry or drop the events waiting in the spool.

    A spooled event is `pending` (waiting for a worker), `taken` (a worker has it), `done`, or
    `bad` (it could not be processed; kept with the reason). A worker that died gives its
    `taken` rows back by itself; `retry` puts `bad` ones back.
    """


@spool.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only rows in this state.")
@click.option("--limit", type=int, default=50, show_default=True, help="Rows shown (newest).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a list of objects).")
@click.pass_context
def list_rows(ctx: click.Context, state: str | None, limit: int, as_json: bool) -> None:
    """Show the spool's rows with their state and, for bad rows, why."""
    with _open(ctx) as queue:
        rows = queue.rows(state)[-limit:] if limit > 0 else queue.rows(state)
        counts = queue.counts()
        waiting = _waiting_in_fallback(queue)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in STATES)
    if waiting:
        summary += f"; {waiting} in {queue.path.with_name(FALLBACK_NAME)} (imported by the worker)"
    click.echo(f"spool: {summary}")
    for row in rows:
        reason = f"  {row['reason']}" if row["reason"] else ""
        click.echo(
            f"{row['id']:>6} {row['state']:<8} {row['claims']:>2}x {row['created_utc'][:19]} "
            f"{_what(row['payload'])}{reason}"
        )


def _check_named(queue: Spool, ids: tuple[int, ...], retrying: bool) -> None:
    """BadInputError naming the first of `ids` the command cannot act on, and why."""
    found = queue.states_of(list(ids))
    is_dead = claimer_judge() if retrying else None
    for row_id in ids:
        if row_id not in found:
            why = "is not in the spool (`patchit spool list` shows its rows)"
        elif not retrying:
            continue
        elif (state := found[row_id][0]) == "pending":
            why = "is pending already: the next worker takes it"
        elif state == "taken" and is_dead and not is_dead(found[row_id][1] or ""):
            why = f"is being processed by a live worker ({found[row_id][1]}): wait for it"
        else:
            continue
        raise BadInputError(f"spool row {row_id} {why}; nothing was changed")


@spool.command("retry")
@click.argument("ids", nargs=-1, type=ROW_ID)
@click.pass_context
def retry(ctx: click.Context, ids: tuple[int, ...]) -> None:
    """Put rows back to pending for the next worker: the given IDS (bad, done, or taken by a
    worker that died), or every bad row."""
    with _open(ctx) as queue:
        _check_named(queue, ids, retrying=True)
        count = queue.retry(list(ids) or None)
    click.echo(f"{count} row(s) back to pending; run `patchit worker --once` to process them")


@spool.command("drop")
@click.argument("ids", nargs=-1, type=ROW_ID)
@click.option("--state", type=click.Choice(["bad", "done"]), help="Drop every row in this state.")
@click.pass_context
def drop(ctx: click.Context, ids: tuple[int, ...], state: str | None) -> None:
    """Delete the given IDS, or every row in --state (bad or done), from the spool."""
    if not ids and not state:
        raise click.UsageError("name the rows to drop (IDS) or a --state (bad or done)")
    if ids and state:
        raise click.UsageError("name the rows to drop (IDS) or a --state, not both")
    with _open(ctx) as queue:
        _check_named(queue, ids, retrying=False)
        count = queue.drop(list(ids) or None, None if ids else state)
    click.echo(f"{count} row(s) dropped")

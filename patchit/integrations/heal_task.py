"""What the `patchit_heal` DAG's task does, without Airflow: take the failure event from the
run's conf and heal it as `patchit worker --once` heals a spooled event
(`patchit.worker.worker.Worker.heal_payloads`: the same parsing, dbt conversion, grouping by cause
and loop), with the state the worker resolves for `home` (`PATCHIT_HOME` by default).

The event is not spooled on the way: the run's conf keeps it until the task ends, and an
incident a killed heal left open is resumed by the next heal run (the worker's recovery). The
memory groups events by cause, so a storm of one cause is one incident however many runs
carry it; a later run of a cause already fixed only attaches its event.

While it heals, the process sets `PATCHIT_CALLBACK_DISABLED=1`: nothing run from the heal
task (a harness re-running the user's failing task, the heal task's own failure) hands a
failure back to patchit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from patchit.errors import BadInputError, PatchitError, one_line
from patchit.events.model import validate_event
from patchit.integrations.airflow import DISABLE_ENV
from patchit.loop.context import build_context
from patchit.state.home import resolve_home
from patchit.worker.worker import MakeContext, Worker

Say = Callable[[str], None]


class HealFailed(PatchitError):
    """The event reached the heal task but could not be processed (the task fails with it)."""


def event_of_conf(conf: Any) -> dict[str, Any]:
    """The event a heal run carries: `conf["event"]` (what the callback sends), or a conf
    that is an event itself (a run triggered by hand with an event's JSON)."""
    if isinstance(conf, Mapping):
        event = conf.get("event", conf if "schema_version" in conf else None)
        if isinstance(event, Mapping):
            return dict(event)
    raise BadInputError(
        'dag_run.conf: no failure event; trigger the heal DAG with conf {"event": {...}} '
        "(an event as `patchit schema` describes it)"
    )


@contextmanager
def _callback_disabled() -> Iterator[None]:
    before = os.environ.get(DISABLE_ENV)
    os.environ[DISABLE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DISABLE_ENV, None)
        else:
            os.environ[DISABLE_ENV] = before


def heal_conf(
    conf: Any,
    home: str | os.PathLike[str] | None = None,
    say: Say = print,
    make_context: MakeContext = build_context,
) -> dict[str, Any]:
    """Heal the event of one heal run; what it did (the task's XCom). BadInputError for a
    conf without a valid event, HealFailed when the event could not be processed or names a
    repository that is not on this worker (the run fails: cleared on the right worker, it
    heals); either in one printable line, whatever the event's names hold."""
    try:
        return _heal_conf(conf, home, say, make_context)
    except (BadInputError, HealFailed) as exc:  # the task's failure: one line, whatever the event
        said = one_line(exc)
        if said == str(exc):
            raise
        raise type(exc)(said) from exc


def _heal_conf(conf: Any, home: str | os.PathLike[str] | None, say: Say,
               make_context: MakeContext) -> dict[str, Any]:  # fmt: skip
    data = event_of_conf(conf)
    event = validate_event(data, "dag_run.conf event")
    if event.repo_path and not os.path.isdir(event.repo_path):
        raise HealFailed(
            f"{event.short()}: repository {event.repo_path} is not on this worker; clear the run "
            "on a worker that has it, or map it (make_failure_callback(repos=...) with a path "
            "every worker has)"
        )
    state = resolve_home(home)
    say(f"healing {event.short()} (event {event.event_id}) with the state in {state}")
    worker = Worker(state, say=say, make_context=make_context)
    with _callback_disabled():
        failed = worker.heal_payloads([json.dumps(data)])
    if failed:
        raise HealFailed(f"{event.short()}: could not be processed: {failed[0]}")
    return {"event_id": event.event_id, "incidents": sorted(worker.stats.incidents)}

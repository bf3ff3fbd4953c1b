"""The Airflow callback's last step: keep the event, even on a full disk.

On a full disk (ENOSPC, EFBIG, a read-only or failing filesystem) neither the spool nor its
fallback file can take an event. It is kept in memory and tried `KEEP_TRIES` times with short
waits (`KEEP_WAITS_S`, under half a second in all: the task must not be held up), then one
line on stderr (the task log) says the event could not be kept, which failure it was and
where it would have gone. The event stays held in this process (at most `MAX_HELD`, the
oldest dropped first) and is spooled before the next failure this process hands over: a DAG
processor or a long-lived worker recovers it once space is freed; a task process that ends
first loses it, and its stderr line is what is left.

Standard library only, like the callback; never raises but `KeyboardInterrupt`.
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from pathlib import Path
from typing import Any

from patchit.intake.spool import fallback_path, spool_event, spool_path
from patchit.text.redaction import clean_text, redact

KEEP_TRIES = 3
KEEP_WAITS_S = (0.1, 0.3)  # between the tries
MAX_HELD = 100
# events no store could take, with their home, oldest first: spooled before the next one
_held: collections.deque[tuple[dict[str, Any], Path]] = collections.deque(maxlen=MAX_HELD)
_held_lock = threading.Lock()


def held_events() -> list[dict[str, Any]]:
    """The events this process holds because no store could take them."""
    with _held_lock:
        return [event for event, _ in _held]


def keep(event: dict[str, Any], home: Path) -> None:
    """Spool `event` (after any held from earlier), trying `KEEP_TRIES` times when no store
    can take it; then it is held in memory and one line on stderr says so."""
    _spool_held()
    error: OSError | None = None
    for attempt in range(KEEP_TRIES):
        if attempt:
            time.sleep(KEEP_WAITS_S[min(attempt - 1, len(KEEP_WAITS_S) - 1)])
        try:
            spool_event(event, home)
            return
        except OSError as exc:  # the spool fell back to its file, and the file failed too
            error = exc
    with _held_lock:
        _held.append((event, home))
    say_not_kept(event, home, error)


def _spool_held() -> None:
    """Spool the events held since a full disk refused them, oldest first; one that still
    cannot be kept stays held with the rest (said once, when it was refused)."""
    with _held_lock:
        held = list(_held)
        _held.clear()
    for number, (event, home) in enumerate(held):
        try:
            spool_event(event, home)
        except OSError:
            with _held_lock:
                _held.extendleft(reversed(held[number:]))
            return


def say_not_kept(event: dict[str, Any], home: Path, error: OSError | None) -> None:
    """One line on stderr (the task log): the event was not kept, and where it would be."""
    unit = f"{event.get('pipeline_id')}.{event.get('unit_id')} (run {event.get('run_id')})"
    why = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
    line = (
        f"patchit: could not keep the failure of {unit} after {KEEP_TRIES} tries ({why}); "
        f"it would have gone to {spool_path(home)} or {fallback_path(home)}; it is held in "
        "this process and spooled with its next failure once space is freed there (lost if "
        "the process ends first)\n"
    )
    try:
        sys.stderr.write(redact(clean_text(line)))
        sys.stderr.flush()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return

"""What the warm dbt worker changes in dbt's events (see `tuning` for the rest).

dbt builds every event's protobuf message when it makes the event (`BaseEvent.__init__`,
with protobuf's pure-Python `ParseDict`), whether or not anything will take it: a warm run
of 21 nodes made some 550 events, most at debug level (each SQL statement, connection,
transaction), that no logger or callback takes when dbt runs without `--debug` and without a
debug log file (the harness runs it so). `tuning` drops such an event when it is fired;
here it is not built either: an event of a debug-level kind, made while nothing would take
a debug event, keeps its arguments and builds its message the first time anything reads or
sets it (fired at a higher level after all, written by a caller), as dbt would have built it
at once. With `--debug`, a debug log file or a callback, every event is built as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from patchit.harnesses.dbt.tuning_base import replace_once

_ARGS = "_patchit_event_args"  # on an event not built yet: the arguments it was made with


def debug_taken() -> Callable[[Any], bool] | None:
    """Whether an event manager would take a debug event: a logger at debug level, or a
    callback other than dbt's tracker of behaviour-change warnings (it reads only those)."""
    try:
        from dbt_common.events.base_types import EventLevel
        from dbt_common.events.logger import _log_level_map
    except ImportError:
        return None
    ignoring: set[Any] = set()
    with contextlib.suppress(ImportError):
        from dbt.tracking import track_behavior_change_warn

        ignoring.add(track_behavior_change_warn)
    debug = _log_level_map[EventLevel.DEBUG]

    def taken(manager: Any) -> bool:
        return any(callback not in ignoring for callback in manager.callbacks) or any(
            _log_level_map.get(logger.level, debug) <= debug for logger in manager.loggers
        )

    return taken


def build_debug_events_when_read() -> None:
    taken = debug_taken()
    try:
        from dbt_common.events.base_types import BaseEvent, EventLevel
        from dbt_common.events.event_manager_client import get_event_manager
    except ImportError:
        return
    if taken is None:
        return
    built: Any = None  # dbt's own __init__, set below

    def build(event: Any) -> None:
        args = event.__dict__.pop(_ARGS, None)  # taken first: building sets pb_msg, here
        if args is not None:
            built(event, **args)

    def make_init(init: Any) -> Any:
        nonlocal built
        built = init

        def init_when_read(self: Any, *args: Any, **kwargs: Any) -> None:
            if not args and _debug_kind(self, EventLevel.DEBUG) and not taken(get_event_manager()):
                object.__setattr__(self, _ARGS, kwargs)
                return
            init(self, *args, **kwargs)

        return init_when_read

    def make_getattr(getattr_: Any) -> Any:
        def getattr_built(self: Any, key: str) -> Any:
            build(self)
            return getattr_(self, key)

        return getattr_built

    def make_setattr(setattr_: Any) -> Any:
        def setattr_built(self: Any, key: str, value: Any) -> None:
            build(self)
            setattr_(self, key, value)

        return setattr_built

    replace_once(BaseEvent, "__init__", make_init)
    replace_once(BaseEvent, "__getattr__", make_getattr)
    replace_once(BaseEvent, "__setattr__", make_setattr)


def _debug_kind(event: Any, debug: Any) -> bool:
    """Whether the event's kind is logged at debug level (its `level_tag`)."""
    try:
        return bool(event.level_tag() == debug)
    except Exception:  # a kind whose level reads its fields: built at once, as dbt does
        return False

"""The failure event every intake produces and every stage consumes."""

from patchit.events.model import (
    SCHEMA_VERSION,
    FailureSource,
    RuntimeFrame,
    RuntimeValue,
    UniversalFailureEvent,
    event_json_schema,
    load_event,
)

__all__ = [
    "SCHEMA_VERSION",
    "FailureSource",
    "RuntimeFrame",
    "RuntimeValue",
    "UniversalFailureEvent",
    "event_json_schema",
    "load_event",
]

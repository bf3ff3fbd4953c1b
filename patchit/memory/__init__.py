"""patchit.memory: error fingerprints and the attempt memory (SQLite).

The names below are imported on first use: the dbt wrapper's green path reads and writes
`patchit.memory.outcomes` alone, without the event and incident models the rest brings in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchit.memory.fingerprint import (
        cause_key,
        cause_message,
        error_fingerprint,
        normalise_message,
        stable_unit_id,
        unit_name,
    )
    from patchit.memory.migrations import MIGRATIONS, apply_migrations
    from patchit.memory.records import (
        AttemptOutcome,
        AttemptRecord,
        Incident,
        IncidentStatus,
        PriorAttempt,
    )
    from patchit.memory.store import (
        DB_RELATIVE_PATH,
        Memory,
        new_incident_id,
    )

_WHERE = {
    "cause_key": "fingerprint",
    "cause_message": "fingerprint",
    "error_fingerprint": "fingerprint",
    "normalise_message": "fingerprint",
    "stable_unit_id": "fingerprint",
    "unit_name": "fingerprint",
    "MIGRATIONS": "migrations",
    "apply_migrations": "migrations",
    "AttemptOutcome": "records",
    "AttemptRecord": "records",
    "Incident": "records",
    "IncidentStatus": "records",
    "PriorAttempt": "records",
    "DB_RELATIVE_PATH": "sqlite",
    "Memory": "store",
    "new_incident_id": "store",
}

__all__ = [
    "DB_RELATIVE_PATH",
    "MIGRATIONS",
    "AttemptOutcome",
    "AttemptRecord",
    "Incident",
    "IncidentStatus",
    "Memory",
    "PriorAttempt",
    "apply_migrations",
    "cause_key",
    "cause_message",
    "error_fingerprint",
    "new_incident_id",
    "normalise_message",
    "stable_unit_id",
    "unit_name",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

"""patchit.memory: error fingerprints and the attempt memory (SQLite)."""

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

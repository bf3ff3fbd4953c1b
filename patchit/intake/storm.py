"""Alert storms: many tasks failing on one outside cause become one incident.

A database outage fails hundreds of tasks within minutes, each with its own dag and task id.
`storm_key` groups infra- and env-looking failures (connection refused, timeouts, DNS, HTTP
5xx, 401/403, a missing Connection or Variable) by the cause alone, ignoring which task hit it;
the attempt fingerprint (`error_fingerprint`) stays per unit.
"""

from __future__ import annotations

import functools
import hashlib
import re

from patchit.events.model import UniversalFailureEvent
from patchit.memory.fingerprint import normalise_message

INFRA = "infra_issue"
ENV = "env_mismatch"

_INFRA_PATTERNS = [
    r"connection refused",
    r"ConnectionRefusedError",
    r"connection (?:reset|aborted)",
    r"timed? ?out\b|TimeoutError|ReadTimeout|ConnectTimeout",
    r"name or service not known|temporary failure in name resolution|nodename nor servname",
    r"could not resolve host|getaddrinfo failed|NameResolutionError|no address associated",
    r"\b5\d\d\b[^\n]{0,40}(?:server error|service unavailable|bad gateway|gateway timeout)",
    r"(?:HTTP(?: Error)?|status(?: code)?)[ :=]*5\d\d\b",
    r"(?:service unavailable|bad gateway|internal server error)",
    r"(?:HTTP(?: Error)?|status(?: code)?)[ :=]*40[13]\b|\b40[13] (?:Unauthorized|Forbidden)",
    r"\bUnauthorized\b|\bForbidden\b|authentication failed",
]
_ENV_PATTERNS = [
    r"conn_id [`'\"]?[\w.-]+[`'\"]? isn't defined",
    r"Variable [`'\"]?[\w.-]+[`'\"]? does not exist",
    r"AirflowNotFoundException",
    r"Env var required but not provided",
]
_INFRA = re.compile("|".join(f"(?:{p})" for p in _INFRA_PATTERNS), re.IGNORECASE)
_ENV = re.compile("|".join(f"(?:{p})" for p in _ENV_PATTERNS), re.IGNORECASE)


def storm_class(event: UniversalFailureEvent) -> str | None:
    """`infra_issue` or `env_mismatch` when the error looks like an outside cause, else None."""
    if event.status == "import_error":
        return None
    text = f"{event.error_type}: {event.error_message}"
    return (_class_of_short if len(text) <= 4096 else _class_of)(text)


def _class_of(text: str) -> str | None:
    if _ENV.search(text):
        return ENV
    if _INFRA.search(text):
        return INFRA
    return None


# a storm's thousands of events carry one message: each is read once per process
_class_of_short = functools.lru_cache(maxsize=1024)(_class_of)


def storm_key(event: UniversalFailureEvent) -> str | None:
    """Cause key shared by every task failing on this outside cause (dag and task ignored)."""
    cls = storm_class(event)
    if cls is None:
        return None
    text = event.error_message
    for name in {event.pipeline_id, event.unit_id} - {""}:
        if name not in text:  # most of a storm's tasks are not named in its message
            continue
        text = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", "<unit>", text)
    roots = [event.repo_path] if event.repo_path else []
    parts = ["storm1", cls, event.error_type, normalise_message(text, roots)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]

"""Finding harnesses: every harness, built-in or third-party, is an entry point in the group
`patchit.harnesses`, and one is chosen per event by inference or by an explicit override."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

from patchit.errors import BadInputError, HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Harness

ENTRY_POINT_GROUP = "patchit.harnesses"


def load_harnesses() -> list[Harness]:
    """One instance of each registered harness, in entry-point name order."""
    harnesses: list[Harness] = []
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            factory = entry.load()
            harness = factory()
        except Exception as exc:  # a broken plugin names itself instead of a bare traceback
            raise HarnessError(
                f"harness plugin {entry.name!r} ({entry.value}) failed to load: {exc}"
            ) from exc
        if not isinstance(harness, Harness):
            raise HarnessError(f"harness plugin {entry.name!r} ({entry.value}) is not a Harness")
        harnesses.append(harness)
    return harnesses


def select_harness(
    event: UniversalFailureEvent,
    repo: Path,
    harnesses: list[Harness],
    override: str | None = None,
) -> Harness:
    """The harness named by `override`, else the first that applies to the event."""
    if override:
        for harness in harnesses:
            if harness.name == override:
                return harness
        known = ", ".join(sorted(h.name for h in harnesses)) or "none installed"
        raise BadInputError(f"harness {override!r} is not installed (known: {known})")
    for harness in harnesses:
        if harness.applies_to(event, repo):
            return harness
    raise HarnessError(
        f"{event.short()}: no installed harness can re-run this unit; set `harness` in config"
    )

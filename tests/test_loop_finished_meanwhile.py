"""Two workers, one cause: the incident is open when the second attaches its event, and fixed
by the first (its lease released) before the second claims it. The second must attach and
stop, not heal a fixed incident again (it used to: the run then failed to mark a fixed
incident failed, and its events ended `bad` in the spool; 1 race in 10 of `make race`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from patchit.events.model import UniversalFailureEvent
from patchit.loop.loop import _not_ours
from patchit.memory import Memory
from patchit.memory.lifecycle import Trigger
from tests.test_worker import airflow_event


def test_an_incident_fixed_between_attach_and_claim_is_left_alone(_patchit_home: Path) -> None:
    event = UniversalFailureEvent.model_validate(airflow_event("dag", "task", "KeyError", "x"))
    said: list[str] = []
    with Memory.open(_patchit_home) as memory:
        incident, _created = memory.open_or_attach(event, "fp", "cause")
        assert incident.status == "open"
        assert memory.claim_incident(incident.id, "first-worker", ttl_s=60)  # the first heals
        memory.transition(incident.id, Trigger.FIXED)
        memory.release_incident(incident.id, "first-worker")
        ctx = SimpleNamespace(memory=memory, owner="second-worker", say=said.append)
        outcome = _not_ours(incident, False, ctx, _patchit_home)  # type: ignore[arg-type]
        assert outcome is not None and outcome.incident.status == "fixed"
        assert not outcome.created
        assert not memory.has_lease(incident.id)  # the second gave its claim back
    assert any("fixed meanwhile" in line for line in said)

"""The incident lifecycle as a table: every (state, trigger) pair, allowed or refused, through
the real memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.memory import IncidentStatus, Memory
from patchit.memory.lifecycle import TRANSITIONS, IllegalTransition, Trigger, next_status

OP, F, E, X = "open", "fixed", "escalated", "failed"

# state -> trigger -> next state, or None where the trigger is refused. Written out in full (not
# derived from TRANSITIONS), so a change to the table must change this test too.
EXPECTED: dict[str, dict[str, str | None]] = {
    OP: {"fixed": F, "escalated": E, "failed": X, "retry": OP, "rejected": None, "reopened": None},
    F: {"fixed": None, "escalated": None, "failed": None, "retry": F, "rejected": X,
        "reopened": OP},
    E: {"fixed": None, "escalated": None, "failed": None, "retry": OP, "rejected": None,
        "reopened": None},
    X: {"fixed": None, "escalated": None, "failed": None, "retry": OP, "rejected": None,
        "reopened": None},
}  # fmt: skip

# how a test reaches each state from a new (open) incident, by triggers alone
PATH_TO: dict[str, list[str]] = {OP: [], F: ["fixed"], E: ["escalated"], X: ["failed"]}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path / "home")
    yield mem
    mem.close()


def new_incident(memory: Memory, name: str) -> str:
    event = UniversalFailureEvent.model_validate(
        {"source": "dbt", "pipeline_id": "shop", "unit_id": f"model.shop.{name}",
         "error_type": "E", "error_message": "boom", "repo_path": "/srv/shop"}
    )  # fmt: skip
    return memory.create_incident(event, f"fp-{name}", f"ck-{name}").id


def test_the_table_covers_every_state_and_trigger() -> None:
    assert set(EXPECTED) == {s.value for s in IncidentStatus}
    for row in EXPECTED.values():
        assert set(row) == {t.value for t in Trigger}
    allowed = {(s, t): n for s, row in EXPECTED.items() for t, n in row.items() if n is not None}
    assert {(s.value, t.value): n.value for (s, t), n in TRANSITIONS.items()} == allowed


@pytest.mark.parametrize(("state", "trigger"), [(s, t) for s in EXPECTED for t in EXPECTED[s]])
def test_each_transition_through_the_memory(memory: Memory, state: str, trigger: str) -> None:
    incident = new_incident(memory, f"{state}-{trigger}")
    for step in PATH_TO[state]:
        memory.transition(incident, step)
    assert memory.get_incident(incident).status.value == state
    expected = EXPECTED[state][trigger]
    if expected is None:
        with pytest.raises(IllegalTransition, match=f"is {state}: |is {state} cannot"):
            memory.transition(incident, trigger, summary="must not be written")
        after = memory.get_incident(incident)
        assert after.status.value == state and after.summary != "must not be written"
    else:
        after = memory.transition(incident, trigger, summary=f"{trigger} fired")
        assert after.status.value == expected and after.summary == f"{trigger} fired"
        assert next_status(state, trigger).value == expected


def test_a_fixed_incident_is_never_downgraded_by_a_retry(memory: Memory) -> None:
    incident = new_incident(memory, "kept")
    memory.transition(incident, "fixed", branch="patchit/kept")
    for _ in range(3):
        memory.transition(incident, "retry")
    kept = memory.get_incident(incident)
    assert kept.status is IncidentStatus.FIXED and kept.branch == "patchit/kept"


def test_status_is_not_a_plain_field(memory: Memory) -> None:
    incident = new_incident(memory, "plain")
    with pytest.raises(TypeError, match="status"):
        memory.update_incident(incident, status="fixed")
    assert memory.get_incident(incident).status is IncidentStatus.OPEN

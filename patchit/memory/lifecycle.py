"""An incident's states and the transitions between them, in one table.

Every status change goes through `Memory.transition(id, trigger)`, which looks the pair
(current status, trigger) up here: a pair that is not in the table is refused, so no code path
can, say, turn a `fixed` incident into `failed` by retrying it.

    state      trigger     next        who fires it
    open       fixed       fixed       a heal landed a verified fix on `patchit/<id>`
    open       escalated   escalated   a heal stopped: not a code bug, only policy refused, a
                                       passing candidate needs review, nothing can verify here
    open       failed      failed      a heal stopped: no candidate verified, or it could not
                                       finish (the report says why)
    open       retry       open        `patchit heal ID` on an incident a dead run left open
    escalated  retry       open        `patchit heal ID`: try again (on today's commit)
    failed     retry       open        `patchit heal ID`: try again (on today's commit)
    fixed      retry       fixed       `patchit heal ID` on a fixed incident: never downgraded
    fixed      rejected    failed      `patchit reject ID --why`: the fix counts as failed
    fixed      reopened    open        `patchit track`: the merged fix had no effect or regressed

A recurrence (the same cause again) attaches its event and changes no state; a failure with
another cause key, or another class than a finished incident's, opens a new incident.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from patchit.errors import BadInputError
from patchit.memory.records import IncidentStatus


class Trigger(StrEnum):
    FIXED = "fixed"
    ESCALATED = "escalated"
    FAILED = "failed"
    RETRY = "retry"
    REJECTED = "rejected"
    REOPENED = "reopened"


_S = IncidentStatus
TRANSITIONS: Final[dict[tuple[IncidentStatus, Trigger], IncidentStatus]] = {
    (_S.OPEN, Trigger.FIXED): _S.FIXED,
    (_S.OPEN, Trigger.ESCALATED): _S.ESCALATED,
    (_S.OPEN, Trigger.FAILED): _S.FAILED,
    (_S.OPEN, Trigger.RETRY): _S.OPEN,
    (_S.ESCALATED, Trigger.RETRY): _S.OPEN,
    (_S.FAILED, Trigger.RETRY): _S.OPEN,
    (_S.FIXED, Trigger.RETRY): _S.FIXED,
    (_S.FIXED, Trigger.REJECTED): _S.FAILED,
    (_S.FIXED, Trigger.REOPENED): _S.OPEN,
}


class IllegalTransition(BadInputError):
    """A trigger that does not apply to the incident's current state."""


def next_status(current: IncidentStatus | str, trigger: Trigger | str) -> IncidentStatus:
    """The state `trigger` moves an incident in `current` to; IllegalTransition if none."""
    state, fired = IncidentStatus(current), Trigger(trigger)
    try:
        return TRANSITIONS[(state, fired)]
    except KeyError:
        raise IllegalTransition(
            f"an incident that is {state.value} cannot be {_PAST[fired]}"
        ) from None


_PAST: Final[dict[Trigger, str]] = {
    Trigger.FIXED: "marked fixed (it is not being healed)",
    Trigger.ESCALATED: "escalated (it is not being healed)",
    Trigger.FAILED: "marked failed (it is not being healed)",
    Trigger.RETRY: "retried",
    Trigger.REJECTED: "rejected (only a fixed incident's fix is)",
    Trigger.REOPENED: "reopened (only a fixed incident is)",
}

"""The LLM ledger: every model call with its real usage, in the memory database.

Budgets are enforced *before* a call from what this ledger already holds (per incident, per
UTC day, rounds, the circuit breaker), so the numbers here are the authoritative ones: an
attempt row carries the tokens of the candidate it stores, but a call that yielded no
candidate (an error, a malformed answer) exists only here.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from patchit.memory.records import IncidentStatus
from patchit.memory.store import Memory
from patchit.text.redaction import environment_secrets, redact


class LlmPurpose(StrEnum):
    PROPOSE = "propose"
    CLASSIFY = "classify"


class CallOutcome(StrEnum):
    OK = "ok"
    ERROR = "error"
    MALFORMED = "malformed"


class LlmCall(BaseModel):
    """One recorded model call."""

    model_config = ConfigDict(extra="forbid")

    id: int
    incident_id: str
    purpose: LlmPurpose
    round: int
    model: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    outcome: CallOutcome
    error: str
    created_utc: datetime


class Totals(BaseModel):
    """Usage summed over some calls."""

    model_config = ConfigDict(extra="forbid")

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


_TOTALS = (
    "select count(*) as calls, coalesce(sum(tokens_in + tokens_out), 0) as tokens,"
    " coalesce(sum(cost_usd), 0.0) as cost_usd from llm_calls"
)


class Ledger:
    """Reads and writes the `llm_calls` table of a `Memory` (same file, same transactions)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def record(
        self,
        incident_id: str,
        purpose: LlmPurpose | str,
        round_no: int,
        model: str,
        *,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
        outcome: CallOutcome | str = CallOutcome.OK,
        error: str = "",
        now: datetime | None = None,
    ) -> int:
        """Store one call (successful or not) with its real usage; returns its id."""
        row = {
            "incident_id": incident_id,
            "purpose": LlmPurpose(purpose).value,
            "round": round_no,
            "model": model,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": cost_usd,
            "outcome": CallOutcome(outcome).value,
            "error": redact(error, environment_secrets()),
            "created_utc": (now or datetime.now(UTC)).astimezone(UTC).isoformat(),
        }
        with self.memory._write() as db:
            table = db.table("llm_calls").insert(row)
        return int(table.last_pk or 0)

    def calls_for(self, incident_id: str) -> list[LlmCall]:
        rows = self.memory._rows(
            "select * from llm_calls where incident_id = ? order by id", (incident_id,)
        )
        return [LlmCall.model_validate(r) for r in rows]

    def incident_totals(self, incident_id: str) -> Totals:
        rows = self.memory._rows(_TOTALS + " where incident_id = ?", (incident_id,))
        return Totals.model_validate(rows[0])

    def day_totals(self, day: date | None = None) -> Totals:
        """Usage of the UTC day `day` (default: today), over every incident."""
        day = day or datetime.now(UTC).date()
        start = datetime.combine(day, time(), UTC)
        end = start + timedelta(days=1)
        rows = self.memory._rows(
            _TOTALS + " where created_utc >= ? and created_utc < ?",
            (start.isoformat(), end.isoformat()),
        )
        return Totals.model_validate(rows[0])

    def rounds_used(self, incident_id: str) -> set[int]:
        """Round numbers of the proposal calls already made for this incident."""
        rows = self.memory._rows(
            "select distinct round from llm_calls where incident_id = ? and purpose = ?",
            (incident_id, LlmPurpose.PROPOSE.value),
        )
        return {int(r["round"]) for r in rows}

    def failed_streak(self, exclude: str | None = None) -> int:
        """How many incidents that used the LLM failed in a row, most recent first.

        Incidents are ordered by their latest LLM call. A `failed` one counts, a `fixed` one
        ends the streak; `open` (still running) and `escalated` ones (not a code bug, or only
        refused by policy: not the model's failure) are passed over. `exclude` is the incident
        being healed now.
        """
        rows = self.memory._rows(
            "select i.id, i.status, max(c.created_utc) as last_call from llm_calls c"
            " join incidents i on i.id = c.incident_id where i.id is not ?"
            " group by i.id order by last_call desc, i.id desc",
            (exclude,),
        )
        streak = 0
        for row in rows:
            if row["status"] == IncidentStatus.FIXED.value:
                break
            if row["status"] == IncidentStatus.FAILED.value:
                streak += 1
        return streak

"""Deliveries in the memory: the pull request opened for an incident's fix (one per incident)."""

from __future__ import annotations

from dataclasses import dataclass

from patchit.memory.sqlite import SqliteStore, now_utc


@dataclass(frozen=True)
class Delivery:
    incident_id: str
    provider: str
    repo: str
    number: int
    url: str
    state: str
    head: str
    base: str


class DeliveryStore(SqliteStore):
    def record_delivery(self, delivery: Delivery) -> None:
        self._require_incident(delivery.incident_id)
        row = {**delivery.__dict__, "updated_utc": now_utc().isoformat()}
        with self._write() as db:
            db.table("deliveries").upsert(row, pk="incident_id")

    def delivery_for(self, incident_id: str) -> Delivery | None:
        rows = self._rows(
            "select incident_id, provider, repo, number, url, state, head, base "
            "from deliveries where incident_id = ?",
            (incident_id,),
        )
        return Delivery(**rows[0]) if rows else None

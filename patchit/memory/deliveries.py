"""Deliveries in the memory: the pull request opened for an incident's fix (one per incident),
and the reviews humans gave it (`patchit approve`, `patchit reject`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class Review:
    incident_id: str
    decision: str  # approved | rejected
    why: str
    who: str
    created_utc: str


class DeliveryStore(SqliteStore):
    def record_review(self, incident_id: str, decision: str, why: str, who: str) -> None:
        self._require_incident(incident_id)
        row = {"incident_id": incident_id, "decision": decision, "why": why, "who": who,
               "created_utc": now_utc().isoformat()}  # fmt: skip
        with self._write() as db:
            db.table("reviews").insert(row)

    def reviews_for(self, incident_id: str) -> list[Review]:
        rows = self._rows(
            "select incident_id, decision, why, who, created_utc from reviews"
            " where incident_id = ? order by id",
            (incident_id,),
        )
        return [Review(**r) for r in rows]

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

    # -- the webhook queue ---------------------------------------------------------------

    def enqueue_notification(
        self, incident_id: str, kind: str, url: str, payload: str, max_queue: int
    ) -> None:
        row = {"incident_id": incident_id, "kind": kind, "url": url, "payload": payload,
               "created_utc": now_utc().isoformat()}  # fmt: skip
        with self._write() as db:
            db.table("notifications").insert(row)
            db.execute(
                "delete from notifications where id not in"
                " (select id from notifications order by id desc limit ?)",
                [max_queue],
            )

    def due_notifications(self, now: float) -> list[dict[str, Any]]:
        return self._rows(
            "select id, url, payload, tries from notifications where next_try <= ? order by id",
            (now,),
        )

    def drop_notification(self, row_id: int) -> None:
        with self._write() as db:
            db.execute("delete from notifications where id = ?", [row_id])

    def retry_notification(self, row_id: int, tries: int, next_try: float, error: str) -> None:
        with self._write() as db:
            db.table("notifications").update(
                row_id, {"tries": tries, "next_try": next_try, "last_error": error}
            )

    def pending_notifications(self) -> int:
        return int(self._rows("select count(*) as n from notifications")[0]["n"])

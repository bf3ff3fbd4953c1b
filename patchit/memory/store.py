"""The attempt memory: events, incidents, attempts, last good commits and healing leases.

One SQLite file (`$PATCHIT_HOME/memory/attempts.sqlite3`) through sqlite-utils, in WAL mode
so a crash never loses a committed row. Every write that reads before it writes (incident
grouping, leases) runs in a `BEGIN IMMEDIATE` transaction: the write lock is taken first, so
several workers sharing the file never open two incidents for one cause or heal one incident
twice.
"""

from __future__ import annotations

import json
import secrets
import time
from datetime import datetime, timedelta
from typing import Any

from sqlite_utils import Database

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent, repo_identity
from patchit.memory.attempts import AttemptStore
from patchit.memory.deliveries import DeliveryStore
from patchit.memory.lifecycle import Trigger, next_status
from patchit.memory.outcomes import OutcomeStore
from patchit.memory.records import Incident, IncidentStatus
from patchit.memory.sqlite import DB_RELATIVE_PATH as DB_RELATIVE_PATH  # re-exported
from patchit.memory.sqlite import now_utc
from patchit.state.liveness import claimer_is_dead, claimer_judge
from patchit.text.redaction import environment_secrets, redact

_UPDATABLE = {
    "fingerprint", "classification", "branch", "report_md", "report_json",
    "summary", "needs_human", "repo_path",
}  # fmt: skip
_INCIDENT_SELECT = """
select i.*,
  (select count(*) from attempts a where a.incident_id = i.id) as attempts,
  (select count(*) from events e where e.incident_id = i.id) as events,
  (i.status != 'fixed' and exists (select 1 from attempts a where a.incident_id = i.id
     and a.outcome = 'needs_review')) as needs_review,
  d.url as pr_url, d.state as pr_state, o.outcome as outcome
from incidents i left join deliveries d on d.incident_id = i.id
  left join outcomes o on o.incident_id = i.id
"""


_now = now_utc


def new_incident_id(now: datetime | None = None) -> str:
    """`20261125-1a2b3c`: the UTC day it was opened and 6 random hex digits."""
    return f"{(now or _now()):%Y%m%d}-{secrets.token_hex(3)}"


class Memory(AttemptStore, DeliveryStore, OutcomeStore):
    """The attempt memory over one SQLite file. Use `Memory.open(home)`."""

    # -- incidents and events --------------------------------------------------------------

    def find_incident(
        self,
        cause_key: str,
        repo_path: str | None,
        window_days: int = 14,
        repo_url: str | None = None,
    ) -> Incident | None:
        """The most recently active incident of this cause and repository within the window.

        The repository is its remote URL when known (clones at other paths share incidents),
        else `bundle:<name>` of its Airflow DAG bundle (`repo_identity`: the bundle's
        checkouts on other hosts share incidents), else its local path. The two meet: an
        event with a URL finds an incident without one at the same path (made before
        migration 8, or from a producer that sent no URL), and an event named by neither URL
        nor bundle finds one with either at its path."""
        since = (_now() - timedelta(days=window_days)).isoformat()
        if repo_url:  # or bundle:NAME
            repo = "(i.repo_url = ? or (i.repo_url is null and i.repo_path is ?))"
            params: tuple[Any, ...] = (cause_key, repo_url, repo_path, since)
        else:
            repo = "i.repo_path is ?"
            params = (cause_key, repo_path, since)
        rows = self._rows(
            _INCIDENT_SELECT + f"where i.cause_key = ? and {repo} and i.updated_utc >= ?"
            " order by i.updated_utc desc, i.created_utc desc limit 1",
            params,
        )
        return Incident.model_validate(rows[0]) if rows else None

    def key_of_failure(
        self,
        fingerprints: list[str],
        repo_path: str | None,
        repo_url: str | None = None,
        commit: str | None = None,
        window_days: int = 14,
    ) -> str | None:
        """The key of the most recently active incident holding a failure of one of these
        fingerprints (at `commit`, when given) in this repository (found as `find_incident`
        finds it) within the window: an earlier run of the same failures; else None."""
        if not fingerprints:
            return None
        since = (_now() - timedelta(days=window_days)).isoformat()
        marks = ", ".join("?" * len(fingerprints))
        sql = (
            "select i.cause_key, e.json from events e join incidents i on i.id = e.incident_id"
            f" where e.fingerprint in ({marks}) and i.updated_utc >= ?"
        )
        params: list[Any] = [*fingerprints, since]
        if repo_url:
            sql += " and (i.repo_url = ? or (i.repo_url is null and i.repo_path is ?))"
            params += [repo_url, repo_path]
        else:
            sql += " and i.repo_path is ?"
            params.append(repo_path)
        if commit:  # only events whose JSON holds the commit's text are read
            sql += " and e.json like ? escape '!'"
            params.append("%" + _like_escape(json.dumps(commit, ensure_ascii=False)) + "%")
        rows = self._rows(sql + " order by i.updated_utc desc limit 32", tuple(params))
        for row in rows:
            if commit is None or json.loads(row["json"]).get("commit") == commit:
                return str(row["cause_key"])
        return None

    def create_incident(
        self, event: UniversalFailureEvent, fingerprint: str, cause_key: str
    ) -> Incident:
        now = _now().isoformat()
        with self._write() as db:
            incident_id = new_incident_id()
            while db.table("incidents").count_where("id = ?", [incident_id]):
                incident_id = new_incident_id()
            db.table("incidents").insert(
                {
                    "id": incident_id,
                    "fingerprint": fingerprint,
                    "cause_key": cause_key,
                    "repo_path": event.repo_path,
                    "repo_url": repo_identity(event),  # a URL, or bundle:NAME
                    "status": IncidentStatus.OPEN.value,
                    "summary": "",
                    "created_utc": now,
                    "updated_utc": now,
                    "needs_human": 0,
                }
            )
            self._insert_event(db, incident_id, event, fingerprint, cause_key)
        return self.get_incident(incident_id)

    def attach_event(
        self, incident_id: str, event: UniversalFailureEvent, fingerprint: str, cause_key: str
    ) -> None:
        """Record one more failure of an incident (a no-op for an event already stored)."""
        self.attach_events(incident_id, [(event, fingerprint)], cause_key)

    def attach_events(
        self,
        incident_id: str,
        events: list[tuple[UniversalFailureEvent, str]],
        cause_key: str,
    ) -> None:
        """Record more failures (event, fingerprint) of an incident in one transaction: an
        outage storm of thousands of events costs one commit, not one per event."""
        with self._write() as db:
            incident = self.get_incident(incident_id)
            self._insert_events(db, incident_id, events, cause_key)
            changes: dict[str, Any] = {"updated_utc": _now().isoformat()}
            url = next((u for e, _ in events if (u := repo_identity(e))), None)
            if url and not incident.repo_url:  # an incident from before repo_url learns it
                changes["repo_url"] = url
            db.table("incidents").update(incident_id, changes)

    def open_or_attach(
        self,
        event: UniversalFailureEvent,
        fingerprint: str,
        cause_key: str,
        window_days: int = 14,
    ) -> tuple[Incident, bool]:
        """Attach to the recent incident of this cause, or open one; (incident, created).

        Find and create run in one IMMEDIATE transaction, so concurrent workers agree.
        """
        with self._write():
            found = self.find_incident(
                cause_key, event.repo_path, window_days, repo_identity(event)
            )
            if found is not None:
                self.attach_event(found.id, event, fingerprint, cause_key)
                incident, created = found.id, False
            else:
                incident, created = self.create_incident(event, fingerprint, cause_key).id, True
        return self.get_incident(incident), created

    def _insert_event(
        self,
        db: Database,
        incident_id: str,
        event: UniversalFailureEvent,
        fingerprint: str,
        cause_key: str,
    ) -> None:
        self._insert_events(db, incident_id, [(event, fingerprint)], cause_key)

    @staticmethod
    def _insert_events(
        db: Database,
        incident_id: str,
        events: list[tuple[UniversalFailureEvent, str]],
        cause_key: str,
    ) -> None:
        """Record events of an incident (one already recorded for it is not recorded twice).

        An event whose id another incident holds (a producer that reused an `event_id`, or
        the same event again once its incident's window has passed) is recorded under
        `event_key(event_id, incident_id)`: an incident always holds the events it was opened
        or attached with, never none (an insert ignored on the id left incidents eventless)."""
        held = _holders(db, [event.event_id for event, _ in events])
        rows = (
            {
                "event_id": event_key(event.event_id, incident_id, held),
                "incident_id": incident_id,
                "fingerprint": fingerprint,
                "cause_key": cause_key,
                "source": event.source.value,
                "unit_id": event.unit_id,
                "created_utc": event.created_utc.isoformat(),
                "json": event.model_dump_json(),
            }
            for event, fingerprint in events
        )
        db.table("events").insert_all(rows, ignore=True, batch_size=500)

    def update_incident(self, incident_id: str, **fields: Any) -> Incident:
        """Change an incident's fields; its status changes only through `transition`."""
        return self._update(incident_id, None, fields)

    def transition(self, incident_id: str, trigger: Trigger | str, **fields: Any) -> Incident:
        """Fire `trigger` (lifecycle.TRANSITIONS decides the next status, or refuses it) and
        change `fields`, in one transaction."""
        return self._update(incident_id, Trigger(trigger), fields)

    def _update(
        self, incident_id: str, trigger: Trigger | None, fields: dict[str, Any]
    ) -> Incident:
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise TypeError(f"update_incident: not updatable: {', '.join(sorted(unknown))}")
        secrets = environment_secrets()
        values = {k: redact(v, secrets) if isinstance(v, str) else v for k, v in fields.items()}
        if "needs_human" in values:
            values["needs_human"] = int(bool(values["needs_human"]))
        values["updated_utc"] = _now().isoformat()
        with self._write() as db:
            current = self.get_incident(incident_id)
            if trigger is not None:
                values["status"] = next_status(current.status, trigger).value
            db.table("incidents").update(incident_id, values)
        return self.get_incident(incident_id)

    def get_incident(self, incident_id: str) -> Incident:
        rows = self._rows(_INCIDENT_SELECT + "where i.id = ?", (incident_id,))
        if not rows:
            raise BadInputError(
                f"incident {incident_id!r} not found in {self.where}; "
                "run `patchit incidents` to list them"
            )
        return Incident.model_validate(rows[0])

    def find_by_id(self, incident_id: str) -> Incident | None:
        rows = self._rows(_INCIDENT_SELECT + "where i.id = ?", (incident_id,))
        return Incident.model_validate(rows[0]) if rows else None

    def list_incidents(self) -> list[Incident]:
        rows = self._rows(_INCIDENT_SELECT + "order by i.created_utc desc, i.id desc")
        return [Incident.model_validate(row) for row in rows]

    def events_for(self, incident_id: str) -> list[UniversalFailureEvent]:
        rows = self._rows(
            "select json from events where incident_id = ? order by created_utc, rowid",
            (incident_id,),
        )
        return [UniversalFailureEvent.model_validate_json(row["json"]) for row in rows]

    def event_commits(self, incident_id: str, besides: str | None = None) -> set[str]:
        """The commits the incident's events (other than `besides`) came from."""
        rows = self._rows(  # read in Python: Postgres' jsonb refuses an event's \u0000
            "select json from events where incident_id = ? and event_id is not ?"
            " and event_id is not ?",
            (incident_id, besides, besides and event_key(besides, incident_id)),
        )
        shas = (json.loads(row["json"]).get("commit") for row in rows)
        return {str(sha) for sha in shas if sha}

    def has_event_from(self, incident_id: str, commit: str, besides: str | None = None) -> bool:
        """Whether one of the incident's events (other than `besides`) came from `commit`.
        Only events whose JSON holds the commit's text are read (a storm's incident holds
        thousands of events: reading them all per batch made a storm quadratic)."""
        pattern = "%" + _like_escape(json.dumps(commit, ensure_ascii=False)) + "%"
        sql = (
            "select json from events where incident_id = ? and event_id is not ? "
            "and event_id is not ? and json like ? escape '!' limit ?"
        )
        limit = 32
        other = besides and event_key(besides, incident_id)
        rows = self._rows(sql, (incident_id, besides, other, pattern, limit))
        if any(json.loads(row["json"]).get("commit") == commit for row in rows):
            return True
        if len(rows) < limit:
            return False
        return commit in self.event_commits(incident_id, besides)  # the text is everywhere

    def split_event(
        self, incident_id: str, event: UniversalFailureEvent, fingerprint: str, cause_key: str
    ) -> Incident:
        """Move `event` out of `incident_id` into a new incident of its own (another cause than
        the one it was attached to), in one transaction."""
        with self._write() as db:
            db.execute(
                "delete from events where event_id in (?, ?) and incident_id = ?",
                [event.event_id, event_key(event.event_id, incident_id), incident_id],
            )
            db.table("incidents").update(incident_id, {"updated_utc": _now().isoformat()})
            return self.create_incident(event, fingerprint, cause_key)

    def latest_event(self, incident_id: str) -> UniversalFailureEvent | None:
        """The incident's newest event (one row, however many it has)."""
        rows = self._rows(
            "select json from events where incident_id = ? "
            "order by created_utc desc, rowid desc limit 1",
            (incident_id,),
        )
        return UniversalFailureEvent.model_validate_json(rows[0]["json"]) if rows else None

    # -- last good commits -----------------------------------------------------------------

    # -- leases ----------------------------------------------------------------------------

    def claim_incident(
        self, incident_id: str, owner: str, ttl_s: float, count_crash: bool = False
    ) -> bool:
        """Take (or renew) the right to heal an incident for ttl_s; False if another holds it.

        With `count_crash` (the sweep of dead runs) a lease taken over from a run that died
        or ran out of time while healing counts one crash of the incident (`crashes_of`); a
        lease the sweep already abandoned (expired at 0) was counted when it was abandoned."""
        now_s = time.time()
        is_dead = claimer_judge()  # /proc read before the lock is taken
        with self._write() as db:
            held = list(
                db.query(
                    "select owner, expires_utc, crashes from leases where incident_id = ?",
                    (incident_id,),
                )
            )
            crashes = 0
            if held:
                lease = held[0]
                holder, expires_utc = lease["owner"], lease["expires_utc"]
                if expires_utc > now_s and holder != owner and not is_dead(holder):
                    return False
                crashes = int(lease["crashes"] or 0)
                if count_crash and expires_utc != 0:
                    crashes += 1  # its holder died or hung: taken over from a dead run
            db.table("leases").upsert(
                {"incident_id": incident_id, "owner": owner, "expires_utc": now_s + ttl_s,
                 "crashes": crashes},
                pk="incident_id",
            )  # fmt: skip
        return True

    def crashes_of(self, incident_id: str) -> int:
        """How many runs healing the incident died (or hung past their lease) since a run of
        it last finished: a finished run gives its lease up, and the count goes with it."""
        rows = self._rows("select crashes from leases where incident_id = ?", (incident_id,))
        return int(rows[0]["crashes"] or 0) if rows else 0

    def release_incident(self, incident_id: str, owner: str) -> None:
        """Give the lease up (only the owner's own lease is removed)."""
        with self._write() as db:
            db.execute(
                "delete from leases where incident_id = ? and owner = ?", (incident_id, owner)
            )

    def has_lease(self, incident_id: str) -> bool:
        return bool(self._rows("select 1 from leases where incident_id = ?", (incident_id,)))

    def lease_is_live(self, incident_id: str) -> bool:
        """Whether a run that is alive holds the incident (an unexpired lease of an owner not
        known to be dead)."""
        rows = self._rows(
            "select owner from leases where incident_id = ? and expires_utc > ?",
            (incident_id, time.time()),
        )
        return bool(rows) and not claimer_is_dead(rows[0]["owner"])

    def dead_leases(self) -> list[str]:
        """Incidents whose lease is held by no live run (expired, or its owner died)."""
        now_s = time.time()
        rows = self._rows("select incident_id, owner, expires_utc from leases")
        is_dead = claimer_judge()  # /proc read once for every owner
        return [r["incident_id"] for r in rows if r["expires_utc"] <= now_s or is_dead(r["owner"])]

    def abandon_incident(self, incident_id: str, owner: str) -> None:
        """Keep the lease row but let it expire now: the incident's run died, its leftovers are
        gone, and the next worker or `patchit heal` resumes it."""
        with self._write() as db:
            db.execute(
                "update leases set expires_utc = 0 where incident_id = ? and owner = ?",
                (incident_id, owner),
            )

    def abandoned_incidents(self) -> list[Incident]:
        """Open incidents whose healing run died: a lease that no live run holds."""
        dead = set(self.dead_leases())
        if not dead:
            return []
        marks = ", ".join("?" * len(dead))
        rows = self._rows(
            _INCIDENT_SELECT + f"where i.id in ({marks}) and i.status = 'open'"
            " order by i.created_utc, i.id",
            tuple(sorted(dead)),
        )
        return [Incident.model_validate(row) for row in rows]


def event_key(event_id: str, incident_id: str, held: dict[str, str] | None = None) -> str:
    """The key of an event's row in `events`: its id, or `<event id>@<incident id>` when
    another incident holds that id (`held`: event id -> incident; None: the second form)."""
    if held is not None and held.get(event_id, incident_id) == incident_id:
        return event_id
    return f"{event_id}@{incident_id}"


def _holders(db: Database, event_ids: list[str]) -> dict[str, str]:
    """Which incident holds each of `event_ids` already (those recorded), in chunks."""
    unique = sorted(set(event_ids))
    held: dict[str, str] = {}
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for row in db.query(
            f"select event_id, incident_id from events where event_id in ({marks})", chunk
        ):
            held[str(row["event_id"])] = str(row["incident_id"])
    return held


def _like_escape(text: str) -> str:
    """`text` as a literal inside a LIKE pattern with `escape '!'`."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")

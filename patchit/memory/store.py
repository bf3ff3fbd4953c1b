"""The attempt memory: events, incidents, attempts, last good commits and healing leases.

One SQLite file (`$PATCHIT_HOME/memory/attempts.sqlite3`) through sqlite-utils, in WAL mode
so a crash never loses a committed row. Every write that reads before it writes (incident
grouping, leases) runs in a `BEGIN IMMEDIATE` transaction: the write lock is taken first, so
several workers sharing the file never open two incidents for one cause or heal one incident
twice.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

from sqlite_utils import Database

from patchit.errors import BadInputError, MemoryStoreError
from patchit.events.model import UniversalFailureEvent
from patchit.memory.migrations import apply_migrations
from patchit.memory.records import AttemptOutcome, AttemptRecord, Incident, IncidentStatus
from patchit.patching.base import PatchCandidate, PriorAttempt
from patchit.patching.diffs import diff_hash

DB_RELATIVE_PATH = Path("memory") / "attempts.sqlite3"
TRIED_OUTCOMES = ("verified", "failed", "needs_review")
_TRIED = ", ".join("?" * len(TRIED_OUTCOMES))


_UPDATABLE = {
    "fingerprint", "status", "classification", "branch", "report_md", "report_json",
    "summary", "needs_human", "repo_path",
}  # fmt: skip
_INCIDENT_SELECT = """
select i.*,
  (select count(*) from attempts a where a.incident_id = i.id) as attempts,
  (select count(*) from events e where e.incident_id = i.id) as events,
  (i.status != 'fixed' and exists (select 1 from attempts a where a.incident_id = i.id
     and a.outcome = 'needs_review')) as needs_review
from incidents i
"""


def _now() -> datetime:
    return datetime.now(UTC)


def _owner_is_dead(owner: str) -> bool:
    """A lease owner `host:pid` on this host whose process is gone left a stale lease."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def new_incident_id(now: datetime | None = None) -> str:
    """`20261125-1a2b3c`: the UTC day it was opened and 6 random hex digits."""
    return f"{(now or _now()):%Y%m%d}-{secrets.token_hex(3)}"


class Memory:
    """The attempt memory over one SQLite file. Use `Memory.open(home)`."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        with self._guard("open"):
            conn = sqlite3.connect(str(path), timeout=busy_timeout_s)
        self.db = Database(conn)
        try:
            with self._guard("open"):
                # A file that is not a database only fails on first read: read now.
                conn.execute("select count(*) from sqlite_master").fetchone()
                self.db.enable_wal()
                conn.execute("PRAGMA foreign_keys = ON")
                apply_migrations(self.db)
        except BaseException:
            conn.close()
            raise

    @classmethod
    def open(cls, home: Path, busy_timeout_s: float = 30.0) -> Memory:
        """Open (creating directories and schema) `<home>/memory/attempts.sqlite3`."""
        path = home / DB_RELATIVE_PATH
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemoryStoreError(
                f"{path.parent}: cannot create the memory directory ({exc.strerror}); "
                "set PATCHIT_HOME or --home to a writable directory"
            ) from exc
        return cls(path, busy_timeout_s)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                hint = f"another process held it longer than {self.busy_timeout_s:g} s; retry"
            elif isinstance(exc, sqlite3.IntegrityError):
                hint = "this is a patchit bug; please report it with this message"
            else:
                hint = "move the file aside (patchit starts a new one) or restore a backup"
            raise MemoryStoreError(
                f"{self.path}: attempt memory could not {action} ({exc}); {hint}"
            ) from exc

    @contextmanager
    def _write(self) -> Iterator[Database]:
        """One IMMEDIATE transaction (reentrant: nested writes join the outer one)."""
        conn = self.db.conn
        with self._guard("write"):
            if conn.in_transaction:
                yield self.db
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._guard("read"):
            return list(self.db.query(sql, params))

    # -- incidents and events --------------------------------------------------------------

    def find_incident(
        self, cause_key: str, repo_path: str | None, window_days: int = 14
    ) -> Incident | None:
        """The most recently active incident of this cause and repository within the window."""
        since = (_now() - timedelta(days=window_days)).isoformat()
        rows = self._rows(
            _INCIDENT_SELECT + "where i.cause_key = ? and i.repo_path is ? and i.updated_utc >= ?"
            " order by i.updated_utc desc, i.created_utc desc limit 1",
            (cause_key, repo_path, since),
        )
        return Incident.model_validate(rows[0]) if rows else None

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
            self.get_incident(incident_id)
            self._insert_events(db, incident_id, events, cause_key)
            db.table("incidents").update(incident_id, {"updated_utc": _now().isoformat()})

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
            found = self.find_incident(cause_key, event.repo_path, window_days)
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
        rows = (
            {
                "event_id": event.event_id,
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
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise TypeError(f"update_incident: not updatable: {', '.join(sorted(unknown))}")
        values = dict(fields)
        if "status" in values:
            values["status"] = IncidentStatus(values["status"]).value
        if "needs_human" in values:
            values["needs_human"] = int(bool(values["needs_human"]))
        values["updated_utc"] = _now().isoformat()
        with self._write() as db:
            self.get_incident(incident_id)
            db.table("incidents").update(incident_id, values)
        return self.get_incident(incident_id)

    def get_incident(self, incident_id: str) -> Incident:
        rows = self._rows(_INCIDENT_SELECT + "where i.id = ?", (incident_id,))
        if not rows:
            raise BadInputError(
                f"incident {incident_id!r} not found in {self.path}; "
                "run `patchit incidents` to list them"
            )
        return Incident.model_validate(rows[0])

    def list_incidents(self) -> list[Incident]:
        rows = self._rows(_INCIDENT_SELECT + "order by i.created_utc desc, i.id desc")
        return [Incident.model_validate(row) for row in rows]

    def events_for(self, incident_id: str) -> list[UniversalFailureEvent]:
        rows = self._rows(
            "select json from events where incident_id = ? order by created_utc, rowid",
            (incident_id,),
        )
        return [UniversalFailureEvent.model_validate_json(row["json"]) for row in rows]

    # -- attempts --------------------------------------------------------------------------

    def record_attempt(
        self,
        incident_id: str,
        fingerprint: str,
        candidate: PatchCandidate,
        diff: str,
        outcome: AttemptOutcome | str,
        reason: str = "",
        verification_output: str = "",
        duration_ms: int = 0,
    ) -> int:
        """Store one attempt (the diff's normalised hash included); returns its id."""
        files = list(dict.fromkeys(edit.path for edit in candidate.edits))
        row = {
            "incident_id": incident_id,
            "fingerprint": fingerprint,
            "diff_hash": diff_hash(diff),
            "strategy": candidate.strategy,
            "tag": candidate.tag,
            "tier": candidate.tier,
            "files": json.dumps(files),
            "diff": diff,
            "outcome": AttemptOutcome(outcome).value,
            "reason": reason,
            "verification_output": verification_output,
            "duration_ms": duration_ms,
            "tokens_in": candidate.tokens_in,
            "tokens_out": candidate.tokens_out,
            "cost_usd": candidate.cost_usd,
            "created_utc": _now().isoformat(),
        }
        with self._write() as db:
            self.get_incident(incident_id)
            table = db.table("attempts").insert(row)
            db.table("incidents").update(incident_id, {"updated_utc": row["created_utc"]})
        return int(table.last_pk or 0)

    def record_refusal(
        self, incident_id: str, fingerprint: str, candidate: PatchCandidate, diff: str, reason: str
    ) -> int:
        """A candidate the pre-check refused: kept for the report, never counted as tried."""
        return self.record_attempt(
            incident_id, fingerprint, candidate, diff, AttemptOutcome.REFUSED, reason=reason
        )

    def attempts_for(self, incident_id: str) -> list[AttemptRecord]:
        rows = self._rows(
            "select * from attempts where incident_id = ? order by id", (incident_id,)
        )
        return [AttemptRecord.model_validate({**r, "files": json.loads(r["files"])}) for r in rows]

    def attempt_count(self, fingerprint: str) -> int:
        """Attempts on this fingerprint that reached verification (a harness limit does not
        count: it says nothing about the candidate)."""
        rows = self._rows(
            f"select count(*) as n from attempts where fingerprint = ? and outcome in ({_TRIED})",
            (fingerprint, *TRIED_OUTCOMES),
        )
        return int(rows[0]["n"])

    def history(self, fingerprint: str) -> list[PriorAttempt]:
        """Every attempt on this fingerprint, oldest first, as strategies see them."""
        rows = self._rows(
            "select diff_hash, tag, outcome, diff, reason,"
            " coalesce(verification_output, '') as output from attempts"
            " where fingerprint = ? order by id",
            (fingerprint,),
        )
        return [PriorAttempt.model_validate(r) for r in rows]

    def seen_diff(self, fingerprint: str, diff_hash: str) -> bool:
        """Whether this normalised diff already went to verification for this fingerprint."""
        rows = self._rows(
            "select 1 from attempts where fingerprint = ? and diff_hash = ?"
            f" and outcome in ({_TRIED}) limit 1",
            (fingerprint, diff_hash, *TRIED_OUTCOMES),
        )
        return bool(rows)

    def failed_tags(self, fingerprint: str) -> set[str]:
        """Strategy buckets whose candidates failed verification on this fingerprint."""
        rows = self._rows(
            "select distinct tag from attempts where fingerprint = ? and outcome = ?",
            (fingerprint, AttemptOutcome.FAILED.value),
        )
        return {r["tag"] for r in rows}

    # -- last good commits -----------------------------------------------------------------

    def record_last_good(self, project_key: str, commit: str) -> None:
        with self._write() as db:
            db.table("last_good").upsert(
                {"project_key": project_key, "commit": commit, "updated_utc": _now().isoformat()},
                pk="project_key",
            )

    def last_good(self, project_key: str) -> str | None:
        rows = self._rows("select [commit] from last_good where project_key = ?", (project_key,))
        return str(rows[0]["commit"]) if rows else None

    # -- leases ----------------------------------------------------------------------------

    def claim_incident(self, incident_id: str, owner: str, ttl_s: float) -> bool:
        """Take (or renew) the right to heal an incident for ttl_s; False if another holds it."""
        now_s = time.time()
        with self._write() as db:
            held = list(
                db.query(
                    "select owner from leases where incident_id = ? and expires_utc > ?",
                    (incident_id, now_s),
                )
            )
            if held and held[0]["owner"] != owner and not _owner_is_dead(held[0]["owner"]):
                return False
            db.table("leases").upsert(
                {"incident_id": incident_id, "owner": owner, "expires_utc": now_s + ttl_s},
                pk="incident_id",
            )
        return True

    def release_incident(self, incident_id: str, owner: str) -> None:
        """Give the lease up (only the owner's own lease is removed)."""
        with self._write() as db:
            db.execute(
                "delete from leases where incident_id = ? and owner = ?", (incident_id, owner)
            )

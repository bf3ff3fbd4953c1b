"""Schema migrations of the attempt memory: numbered functions, applied in order, once.

A migration that has been released is never edited; a schema change is a new function appended
to `MIGRATIONS`. Each applied one is recorded in `_migrations` inside the same transaction as
its changes, so a crash never leaves a half-applied migration marked done.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # counting MIGRATIONS (patchit.memory.runlog) needs no sqlite-utils
    from sqlite_utils import Database

Migration = Callable[["Database"], None]


def m001_initial(db: Database) -> None:
    db.table("incidents").create(
        {
            "id": str,
            "fingerprint": str,
            "cause_key": str,
            "repo_path": str,
            "status": str,
            "classification": str,
            "branch": str,
            "report_md": str,
            "report_json": str,
            "summary": str,
            "created_utc": str,
            "updated_utc": str,
            "needs_human": int,
        },
        pk="id",
        not_null={"fingerprint", "cause_key", "status", "created_utc", "updated_utc"},
        defaults={"status": "open", "summary": "", "needs_human": 0},
    )
    db.table("incidents").create_index(["cause_key", "updated_utc"])
    db.table("events").create(
        {
            "event_id": str,
            "incident_id": str,
            "fingerprint": str,
            "cause_key": str,
            "source": str,
            "unit_id": str,
            "created_utc": str,
            "json": str,
        },
        pk="event_id",
        not_null={"incident_id", "fingerprint", "cause_key", "json"},
        foreign_keys=[("incident_id", "incidents", "id")],
    )
    db.table("events").create_index(["incident_id"])
    db.table("attempts").create(
        {
            "id": int,
            "incident_id": str,
            "fingerprint": str,
            "diff_hash": str,
            "strategy": str,
            "tag": str,
            "tier": int,
            "files": str,
            "diff": str,
            "outcome": str,
            "reason": str,
            "verification_output": str,
            "duration_ms": int,
            "tokens_in": int,
            "tokens_out": int,
            "cost_usd": float,
            "created_utc": str,
        },
        pk="id",
        not_null={"incident_id", "fingerprint", "diff_hash", "tag", "outcome", "created_utc"},
        foreign_keys=[("incident_id", "incidents", "id")],
    )
    db.table("attempts").create_index(["fingerprint", "diff_hash"])
    db.table("attempts").create_index(["fingerprint", "tag"])
    db.table("attempts").create_index(["incident_id"])
    db.table("last_good").create(
        {"project_key": str, "commit": str, "updated_utc": str},
        pk="project_key",
        not_null={"commit", "updated_utc"},
    )
    # One row per incident being healed: the owner holds it until expires_utc.
    db.table("leases").create(
        {"incident_id": str, "owner": str, "expires_utc": float},
        pk="incident_id",
        not_null={"owner", "expires_utc"},
    )


def m002_llm_calls(db: Database) -> None:
    """The LLM ledger: one row per model call, so budgets are checked before the next one."""
    db.table("llm_calls").create(
        {
            "id": int,
            "incident_id": str,
            "purpose": str,
            "round": int,
            "model": str,
            "tokens_in": int,
            "tokens_out": int,
            "cost_usd": float,
            "outcome": str,
            "error": str,
            "created_utc": str,
        },
        pk="id",
        not_null={"incident_id", "purpose", "outcome", "created_utc"},
        defaults={"round": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "error": ""},
    )
    db.table("llm_calls").create_index(["incident_id"])
    db.table("llm_calls").create_index(["created_utc"])


def m003_landing(db: Database) -> None:
    """What a crashed run needs to land a fix it verified: the commit it was verified on, the
    candidate with its verification and data check (JSON), and the branch once it landed."""
    attempts = db.table("attempts")
    attempts.add_column("commit", str)
    attempts.add_column("verified_json", str)
    attempts.add_column("landed_branch", str)
    # before this migration a verified attempt of a fixed incident was on its branch
    db.execute(
        "update attempts set landed_branch = (select branch from incidents i"
        " where i.id = attempts.incident_id and i.status = 'fixed')"
        " where outcome = 'verified'"
    )


def m004_deliveries(db: Database) -> None:
    """The pull request opened for an incident's fix: one per incident, updated in place."""
    db.table("deliveries").create(
        {
            "incident_id": str,
            "provider": str,
            "repo": str,
            "number": int,
            "url": str,
            "state": str,
            "head": str,
            "base": str,
            "updated_utc": str,
        },
        pk="incident_id",
        not_null={"provider", "number", "url", "state", "updated_utc"},
        foreign_keys=[("incident_id", "incidents", "id")],
    )


def m005_reviews(db: Database) -> None:
    """A human's decision on a fix: `patchit approve` / `patchit reject --why`."""
    db.table("reviews").create(
        {"id": int, "incident_id": str, "decision": str, "why": str, "who": str,
         "created_utc": str},
        pk="id",
        not_null={"incident_id", "decision", "created_utc"},
        foreign_keys=[("incident_id", "incidents", "id")],
    )  # fmt: skip
    db.table("reviews").create_index(["incident_id"])


def m006_notifications(db: Database) -> None:
    """Webhook messages not yet delivered (a bounded queue, retried with backoff)."""
    db.table("notifications").create(
        {"id": int, "incident_id": str, "kind": str, "url": str, "payload": str, "tries": int,
         "next_try": float, "last_error": str, "created_utc": str},
        pk="id",
        not_null={"kind", "url", "payload", "created_utc"},
        defaults={"tries": 0, "next_try": 0.0, "last_error": ""},
    )  # fmt: skip


def m007_outcomes(db: Database) -> None:
    """Runs of units as the wrapper saw them, and what became of each landed fix after merge."""
    db.table("unit_runs").create(
        {"id": int, "repo_path": str, "unit_id": str, "commit": str, "passed": int,
         "fingerprint": str, "run_utc": str},
        pk="id",
        not_null={"repo_path", "unit_id", "commit", "passed", "run_utc"},
    )  # fmt: skip
    db.table("unit_runs").create_index(["repo_path", "unit_id", "run_utc"])
    db.table("outcomes").create(
        {"incident_id": str, "outcome": str, "fix_commit": str, "merged_into": str,
         "seen_commit": str, "detail": str, "checked_utc": str},
        pk="incident_id",
        not_null={"outcome", "checked_utc"},
        foreign_keys=[("incident_id", "incidents", "id")],
    )  # fmt: skip


def m008_repo_url(db: Database) -> None:
    """The repository's normalised remote URL: clones of it at other paths (on other hosts)
    group their failures into the same incidents."""
    db.table("incidents").add_column("repo_url", str)
    db.table("incidents").create_index(["cause_key", "repo_url"])


def m009_lease_crashes(db: Database) -> None:
    """How many runs healing an incident died since one last finished (counted by the sweep
    that finds each dead): the worker stops resuming an incident that keeps killing it."""
    db.execute("alter table leases add column crashes integer not null default 0")


def m010_last_good_runtime(db: Database) -> None:
    """What ran the project's last good build (`dbt=1.11.16 duckdb=1.11.1`): a failure of
    unchanged code after an upgrade of dbt or its adapter is the environment's, not a bug."""
    db.table("last_good").add_column("runtime", str)


def m011_events_latest(db: Database) -> None:
    """An incident's newest event is read by index: `latest_event` sorted every event of the
    incident, and a storm's incident re-read its thousands of events at each batch."""
    db.table("events").create_index(["incident_id", "created_utc"])


def m012_last_good_source_types(db: Database) -> None:
    """The column types of the sources the last good build read (JSON: relation -> column ->
    type): a source whose column changed type since is upstream schema drift, not a bug."""
    db.table("last_good").add_column("source_types", str)


MIGRATIONS: list[Migration] = [
    m001_initial, m002_llm_calls, m003_landing, m004_deliveries, m005_reviews,
    m006_notifications, m007_outcomes, m008_repo_url, m009_lease_crashes,
    m010_last_good_runtime, m011_events_latest, m012_last_good_source_types,
]  # fmt: skip


def _ensure_migrations_table(db: Database) -> None:
    if "_migrations" not in db.table_names():
        db.table("_migrations").create({"id": int, "name": str, "applied_utc": str}, pk="id")


def applied_migrations(db: Database) -> list[int]:
    if "_migrations" not in db.table_names():
        return []
    return [row["id"] for row in db.query("select id from _migrations order by id")]


def apply_migrations(db: Database) -> list[str]:
    """Apply the pending migrations in one IMMEDIATE transaction; returns their names.

    IMMEDIATE takes the write lock before reading `_migrations`, so two processes opening a
    new store at once do not both run migration 1.
    """
    if len(applied_migrations(db)) == len(MIGRATIONS):
        return []  # the common case needs no write lock: opening never waits on a writer
    db.conn.execute("BEGIN IMMEDIATE")
    try:
        _ensure_migrations_table(db)
        done = set(applied_migrations(db))
        names: list[str] = []
        for number, migration in enumerate(MIGRATIONS, start=1):
            if number in done:
                continue
            migration(db)
            db.table("_migrations").insert(
                {
                    "id": number,
                    "name": migration.__name__,
                    "applied_utc": datetime.now(UTC).isoformat(),
                }
            )
            names.append(migration.__name__)
        db.conn.execute("COMMIT")
    except BaseException:
        if db.conn.in_transaction:
            db.conn.execute("ROLLBACK")
        raise
    return names

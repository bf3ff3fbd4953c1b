"""Outcomes in the memory: each run of a unit the wrapper saw (passed, or failed with a
fingerprint), each project's last good commit, and what became of a landed fix once merged
(`patchit track`).

Import-light (no event or incident models). A green `patchit dbt -- build` records its runs
through `patchit.memory.runlog`, which hands them here when the file needs creating, repairing
or migrating.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchit.memory.runlog import UnitRun as UnitRun  # re-exported
from patchit.memory.runlog import project_key_for as project_key_for  # re-exported
from patchit.memory.sqlite import SqliteStore, now_utc


@dataclass(frozen=True)
class Outcome:
    incident_id: str
    outcome: str  # pending | fixed | no_effect | regression
    fix_commit: str
    merged_into: str
    seen_commit: str
    detail: str


class OutcomeStore(SqliteStore):
    def record_green(
        self,
        runs: list[UnitRun],
        last_good: tuple[str, str] | None,
        runtime: str | None = None,
        source_types: str | None = None,
    ) -> None:
        """A green run's record (`RunLog.record_green`) in one transaction."""
        with self._write():
            self.record_unit_runs(runs)
            if last_good is not None:
                self.record_last_good(*last_good, runtime=runtime, source_types=source_types)

    def record_last_good(
        self,
        project_key: str,
        commit: str,
        runtime: str | None = None,
        source_types: str | None = None,
    ) -> None:
        """The project's last good commit, what ran it (`dbt=... duckdb=...`, if known) and the
        column types of the sources it read (JSON, `intake.source_types`)."""
        with self._write() as db:
            db.table("last_good").upsert(
                {
                    "project_key": project_key,
                    "commit": commit,
                    "updated_utc": now_utc().isoformat(),
                    "runtime": runtime,
                    "source_types": source_types,
                },
                pk="project_key",
            )

    def last_good(self, project_key: str) -> str | None:
        rows = self._rows("select [commit] from last_good where project_key = ?", (project_key,))
        return str(rows[0]["commit"]) if rows else None

    def last_good_runtime(self, project_key: str) -> str | None:
        """What ran the last good build (`dbt=1.11.16 duckdb=1.11.1`); None if not recorded."""
        rows = self._rows("select runtime from last_good where project_key = ?", (project_key,))
        return str(rows[0]["runtime"]) if rows and rows[0]["runtime"] else None

    def last_good_source_types(self, project_key: str) -> str | None:
        """The column types of the sources the last good build read (JSON); None if not
        recorded."""
        rows = self._rows(
            "select source_types from last_good where project_key = ?", (project_key,)
        )
        return str(rows[0]["source_types"]) if rows and rows[0]["source_types"] else None

    def record_unit_runs(self, runs: list[UnitRun]) -> None:
        now = now_utc().isoformat()
        rows = [{**r.__dict__, "passed": int(r.passed), "run_utc": r.run_utc or now} for r in runs]
        if rows:
            with self._write() as db:
                db.table("unit_runs").insert_all(rows)

    def unit_runs(self, repo_path: str, since_utc: str = "") -> list[UnitRun]:
        """Every run of the repository's units recorded after `since_utc`, oldest first."""
        rows = self._rows(
            'select repo_path, unit_id, "commit", passed, fingerprint, run_utc from unit_runs'
            " where repo_path = ? and run_utc > ? order by run_utc, id",
            (repo_path, since_utc),
        )
        return [UnitRun(**{**r, "passed": bool(r["passed"])}) for r in rows]

    def latest_unit_runs(self, repo_path: str) -> list[UnitRun]:
        """Each unit's last recorded run in the repository (as `unit_runs` orders them)."""
        rows = self._rows(
            'select repo_path, unit_id, "commit", passed, fingerprint, run_utc from ('
            "  select *, row_number() over (partition by unit_id order by run_utc desc, id desc)"
            "  as nth from unit_runs where repo_path = ?"
            ") where nth = 1 order by unit_id",
            (repo_path,),
        )
        return [UnitRun(**{**r, "passed": bool(r["passed"])}) for r in rows]

    def record_outcome(self, outcome: Outcome) -> None:
        self._require_incident(outcome.incident_id)
        row = {**outcome.__dict__, "checked_utc": now_utc().isoformat()}
        with self._write() as db:
            db.table("outcomes").upsert(row, pk="incident_id")

    def outcome_for(self, incident_id: str) -> Outcome | None:
        rows = self._rows(
            "select incident_id, outcome, fix_commit, merged_into, seen_commit, detail"
            " from outcomes where incident_id = ?",
            (incident_id,),
        )
        return Outcome(**rows[0]) if rows else None

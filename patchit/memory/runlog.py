"""A green run's record in the memory, written with the standard library's sqlite3.

`patchit dbt -- build` on green records each node's result at the commit (`unit_runs`) and,
for a whole-project build on a clean tree, the project's last good commit (`last_good`). That
is two statements: `RunLog` writes them with plain sqlite3, without sqlite-utils (whose import
and plugin lookup cost more than the writes), when the memory file is there, healthy and fully
migrated; otherwise (a first run, a damaged file, an older schema) it writes nothing and says
so, and the caller hands the same record to `OutcomeStore.record_green`, which creates,
repairs or migrates the file as every other open does. With a Postgres state (`patchit.state`)
it writes nothing either: `OutcomeStore` writes the shared state.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from patchit.state.dbfiles import damage_of, quick_check
from patchit.state.url import StateUrlError, state_url

DB_RELATIVE_PATH = Path("memory") / "attempts.sqlite3"


@dataclass(frozen=True)
class UnitRun:
    repo_path: str
    unit_id: str
    commit: str
    passed: bool
    fingerprint: str = ""
    run_utc: str = ""


def project_key_for(repo: Path | str | None, project: Path | str) -> str:
    """Key of a project's last good commit in memory."""
    return f"{repo}::{project}"


class RunLog:
    """The memory under `home`, as a green run writes to it."""

    def __init__(self, home: Path, busy_timeout_s: float = 30.0) -> None:
        self.home = home
        self.busy_timeout_s = busy_timeout_s

    def record_green(
        self,
        runs: list[UnitRun],
        last_good: tuple[str, str] | None,
        runtime: str | None = None,
        source_types: str | None = None,
    ) -> bool:
        """`runs`, and `last_good` (project key, commit; `runtime`, what ran it) when given, in
        one transaction; False,
        having written nothing, when the file is not one to write as it is (see above)."""
        from patchit.memory.migrations import MIGRATIONS

        if not runs and last_good is None:
            return True
        try:
            if state_url(self.home) is not None:
                return False  # the memory is the shared Postgres state: OutcomeStore writes it
        except StateUrlError:
            return False  # the full store says what is wrong with it
        path = self.home / DB_RELATIVE_PATH
        if not path.is_file() or damage_of(path):
            return False
        try:
            conn = sqlite3.connect(str(path), timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error:
            return False
        try:
            if quick_check(conn):
                return False
            done = conn.execute(
                "select count(*) from sqlite_master where type = 'table' and name = '_migrations'"
            ).fetchone()[0]
            if not done or conn.execute("select count(*) from _migrations").fetchone()[0] != len(
                MIGRATIONS
            ):
                return False
            now = datetime.now(UTC).isoformat()
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    'insert into unit_runs (repo_path, unit_id, "commit", passed, fingerprint,'
                    " run_utc) values (?, ?, ?, ?, ?, ?)",
                    [(r.repo_path, r.unit_id, r.commit, int(r.passed), r.fingerprint,
                      r.run_utc or now) for r in runs],
                )  # fmt: skip
                if last_good is not None:
                    conn.execute(
                        'insert into last_good (project_key, "commit", updated_utc, runtime,'
                        " source_types) values (?, ?, ?, ?, ?) on conflict (project_key) do"
                        ' update set "commit" = excluded."commit",'
                        " updated_utc = excluded.updated_utc, runtime = excluded.runtime,"
                        " source_types = excluded.source_types",
                        (*last_good, now, runtime, source_types),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error:
            return False  # the full store opens it again and says what is wrong
        finally:
            conn.close()
        return True

"""How each kind of scenario is run: plainly (what a user runs without patchit), through
patchit (what a user runs with it), and from scratch for the hidden check.

dbt: `dbt build` / `patchit dbt -- build`; the hidden check queries the project's DuckDB
file. Airflow: `airflow dags test` with an isolated `AIRFLOW_HOME` (copied from one template
migrated per corpus run); with patchit, the DAG's `on_failure_callback` spools the failure
and `patchit worker --once` heals it, or, for a DAG file that does not import, `patchit
airflow scan` spools it. The hidden check reads the file the DAG writes.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from patchit.bench.corpus_env import Proc, base_env, duckdb_lock, run, tool
from patchit.bench.corpus_model import AIRFLOW_KINDS, Scenario
from patchit.bench.corpus_wh import SchemaBench


class BenchRuntime:
    """Runs of one scenario in a scratch dir `work` (Airflow homes are made there)."""

    def __init__(
        self,
        scenario: Scenario,
        work: Path,
        airflow_template: Path | None,
        shared: SchemaBench | None = None,
    ) -> None:
        self.scenario = scenario
        self.work = work
        self.airflow_template = airflow_template
        self.shared = shared  # dbt on Postgres/Snowflake: a schema per checkout
        self._homes = itertools.count(1)

    # -- environments ------------------------------------------------------------------

    def env(
        self, broken: bool, extra: dict[str, str] | None = None, repo: Path | None = None
    ) -> dict[str, str]:
        values = dict(self.scenario.env)
        if self.shared is not None and repo is not None:
            values.update(self.shared.env(repo))
        if broken:
            values.update(self.scenario.broken_env)
        values.update(extra or {})
        return base_env(values)

    def _airflow_env(self, repo: Path, broken: bool, extra: dict[str, str]) -> dict[str, str]:
        assert self.airflow_template is not None, "Airflow scenarios need a migrated template"
        home = self.work / f"airflow-home-{next(self._homes)}"
        shutil.copytree(self.airflow_template, home)
        return self.env(
            broken,
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                "AIRFLOW__CORE__DAGS_FOLDER": str(repo / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
                **extra,
            },
        )

    # -- the user's data -----------------------------------------------------------------

    def user_data(self, repo: Path) -> Path:
        """The user's database file (dbt) or output directory (Airflow)."""
        if self.scenario.kind in AIRFLOW_KINDS:
            return repo / "output"
        if self.shared is not None:
            return repo  # the data is in the checkout's schema: `data_hash` reads it
        profiles = yaml.safe_load((repo / "profiles.yml").read_text())
        profile = next(iter(profiles.values()))
        return repo / str(profile["outputs"][profile["target"]]["path"])

    def prepare_home(self, home: Path) -> None:
        """The operator's settings every patchit run of the scenario needs (Snowflake's
        `[sandbox] sf_role`), then the scenario's own (`operator`, e.g. a policy relaxed)."""
        shared = self.shared.operator_settings if self.shared is not None else ""
        settings = "\n".join(s for s in (shared, self.scenario.operator) if s)
        if settings:
            home.mkdir(parents=True, exist_ok=True)
            (home / "patchit.toml").write_text(settings, encoding="utf-8")

    # -- runs --------------------------------------------------------------------------

    def history_run(self, repo: Path, home: Path | None) -> Proc | None:
        """Yesterday's green run of the good commit, before the breaking commit lands: dbt
        through `patchit dbt -- build` (with `home`) or plain `dbt build`, so the user's
        database exists as it does in a daily job. Airflow: none (a task run leaves only
        its own output). None for a fresh checkout: it was never built."""
        if self.scenario.kind != "dbt" or self.scenario.fresh_checkout:
            return None
        if home is None:
            return run([tool("dbt"), "build"], self.env(broken=False, repo=repo), repo)
        cmd = [tool("patchit"), "dbt", "--", "build"]
        env = self.env(broken=False, extra={"PATCHIT_HOME": str(home)}, repo=repo)
        return run(cmd, env, repo)

    def plain_run(self, repo: Path) -> Proc:
        """The broken commit run as a user runs it without patchit."""
        if self.scenario.kind == "dbt":
            with self._maybe_locked(repo):
                return run([tool("dbt"), "build"], self.env(broken=True, repo=repo), repo)
        return self._dags_test(repo, broken=True, extra={"PATCHIT_CALLBACK_DISABLED": "1"})

    def patchit_run(self, repo: Path, home: Path) -> list[Proc]:
        """The broken commit run as a user runs it with patchit; the commands, in order."""
        with_home = {"PATCHIT_HOME": str(home)}
        if self.scenario.kind == "dbt":
            with self._maybe_locked(repo):
                cmd = [tool("patchit"), "dbt", "--", "build"]
                return [run(cmd, self.env(broken=True, extra=with_home, repo=repo), repo)]
        procs: list[Proc] = []
        if self.scenario.kind == "airflow_callback":
            procs.append(self._dags_test(repo, broken=True, extra=with_home))
        else:
            procs.append(self._dags_test(repo, True, {"PATCHIT_CALLBACK_DISABLED": "1"}))
            env = self._airflow_env(repo, broken=True, extra=with_home)
            scan = [tool("patchit"), "airflow", "scan", "--dags-folder", str(repo / "dags")]
            procs.append(run(scan, env, repo))
        worker = [tool("patchit"), "worker", "--once"]
        procs.append(run(worker, self._airflow_env(repo, broken=True, extra=with_home), repo))
        return procs

    def run_from_scratch(self, checkout: Path, broken: bool) -> Proc:
        """Run a checkout with no earlier state (fresh DuckDB file or schema / AIRFLOW_HOME)."""
        if self.scenario.kind == "dbt":
            if self.shared is not None:
                self.shared.drop(checkout)
            return run([tool("dbt"), "build"], self.env(broken, repo=checkout), checkout)
        return self._dags_test(checkout, broken, extra={"PATCHIT_CALLBACK_DISABLED": "1"})

    def read_check(self, checkout: Path) -> Any:
        """The hidden check's value in a checkout that was run (None: no value)."""
        check = self.scenario.check
        if self.scenario.kind == "dbt":
            return self.query(checkout, check.sql or "")
        return read_output(checkout / (check.file or ""))

    def query(self, checkout: Path, sql: str) -> Any:
        """The rows of `sql` over a dbt checkout's built data (None: nothing was built)."""
        if self.shared is not None:
            return self.shared.query(checkout, sql)
        db = self.user_data(checkout)
        return query_rows(db, sql) if db.exists() else None

    def data_hash(self, repo: Path) -> str | None:
        """The user's data as "untouched" compares it, when it is not a file here (a shared
        warehouse's schemas)."""
        if self.shared is not None and self.scenario.kind == "dbt":
            return self.shared.content_hash(repo)
        return None

    def migrate_needed(self) -> bool:
        return self.scenario.kind in AIRFLOW_KINDS

    # -- helpers -----------------------------------------------------------------------

    def _dags_test(self, repo: Path, broken: bool, extra: dict[str, str]) -> Proc:
        assert self.scenario.dag_id is not None
        env = self._airflow_env(repo, broken, extra)
        cmd = [tool("airflow"), "dags", "test", self.scenario.dag_id, self.scenario.logical_date]
        return run(cmd, env, repo)

    def _maybe_locked(self, repo: Path) -> Any:
        from contextlib import nullcontext

        if self.scenario.hold_db_lock:
            return duckdb_lock(self.user_data(repo))
        return nullcontext()


def migrate_airflow_template(dest: Path) -> Proc:
    """One migrated SQLite metadata DB, copied for every Airflow run of the corpus."""
    dest.mkdir(parents=True, exist_ok=True)
    env = base_env(
        {
            "AIRFLOW_HOME": str(dest),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{dest / 'airflow.db'}",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dest / "dags"),
        }
    )
    return run([tool("airflow"), "db", "migrate"], env, dest, timeout_s=600)


def query_rows(db_file: Path, sql: str) -> list[list[Any]] | str:
    """The rows of `sql` over a DuckDB file (read-only), JSON-ready; an error as a string."""
    import duckdb

    try:
        con = duckdb.connect(str(db_file), read_only=True)
    except duckdb.Error as exc:
        return f"error: {exc}"
    try:
        rows = con.execute(sql).fetchall()
    except duckdb.Error as exc:
        return f"error: {exc}"
    finally:
        con.close()
    return [[_plain(v) for v in row] for row in rows]


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return round(value, 6)
    return str(value)


def read_output(path: Path) -> Any:
    """A file the DAG wrote: parsed JSON, else its text; None when it was not written."""
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError:
        return text

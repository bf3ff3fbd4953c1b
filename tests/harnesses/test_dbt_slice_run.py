"""Real dbt on a warehouse slice (`patchit.harnesses.dbt.slice`): the candidate's DuckDB file
holds only what its selection reads, an incremental model in the selection still sees its
rows, a relation read outside the graph sends the run to the whole copy, and neither the
user's file nor the incident snapshot is written."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt import preparation
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree
from tests.conftest import commit_all, git, run_dbt

pytestmark = pytest.mark.slow

PROJECT = {
    "dbt_project.yml": "name: p\nprofile: p\nconfig-version: 2\nmodel-paths: [models]\n",
    "profiles.yml": "p:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
    "      path: p.duckdb\n      threads: 1\n",
    "models/stg.sql": "select range as id from range(3)\n",
    "models/events.sql": "{{ config(materialized='incremental', unique_key='id') }}\n"
    "select id from {{ ref('stg') }}\n",
    "models/unrelated.sql": "select 1 as x\n",
    # reads a table no dbt node makes, by name: the graph cannot tell
    "models/legacy.sql": "select count(*) as n from main.raw_ids\n",
}


def _digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def _event(repo: Path, unit: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source="dbt", pipeline_id="p", unit_id=f"model.p.{unit}", repo_path=str(repo),
        commit=git(repo, "rev-parse", "HEAD"),
        artifacts={"manifest": str(repo / "target" / "manifest.json")},
        dbt=DbtInvocation(command="build", args=["build"], project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip


def _built_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(patchit's home, a committed repo of PROJECT built once, the incremental's history
    holding a row of the user's own)."""
    home = tmp_path / "home"
    monkeypatch.setenv("PATCHIT_HOME", str(home))
    repo = tmp_path / "repo"
    for rel, text in PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    with duckdb.connect(str(repo / "p.duckdb")) as con:
        con.execute("create table main.raw_ids as select 1 as id")
    assert run_dbt(repo, "build").returncode == 0
    with duckdb.connect(str(repo / "p.duckdb")) as con:  # the incremental's history
        con.execute("insert into main.events values (99)")
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb*\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "p")
    return home, repo


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_a_candidate_runs_on_a_slice_of_what_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    home, repo = _built_repo(tmp_path, monkeypatch)
    user_db = _digest(repo / "p.duckdb")
    snapshot = snapshot_database(repo / "p.duckdb", home / "snapshots" / "i1")
    snapped = _digest(snapshot)

    with DbtHarness(warm=warm) as harness:
        for unit, number in (("stg", 1), ("legacy", 2)):
            root = create_worktree(repo, "HEAD", home / "worktrees" / f"c{number}")
            try:
                model = root / "models" / f"{unit}.sql"
                model.write_text(model.read_text() + f"-- candidate {number}\n")
                workspace = Workspace(root=root, scratch=home / "sandboxes" / f"c{number}",
                                      snapshot=snapshot.parent)  # fmt: skip
                result = harness.verify(workspace, _event(repo, unit))
                assert result.passed, result.output
                with duckdb.connect(str(root / "p.duckdb"), read_only=True) as con:
                    tables = {r[0] for r in con.execute(
                        "select table_name from information_schema.tables").fetchall()}  # fmt: skip
                    events = con.execute("select id from main.events order by id").fetchall()
                if unit == "stg":  # stg+: stg and events built; nothing else copied
                    assert tables == {"stg", "events"}
                    assert "2 relation(s) the selection reads" in result.isolation
                    assert events == [(0,), (1,), (2,), (99,)]  # the user's row kept
                else:  # main.raw_ids was missing from the slice: run again on the whole copy
                    assert "whole incident snapshot (a slice" in result.isolation
                    assert {"raw_ids", "unrelated", "legacy"} <= tables
            finally:
                remove_worktree(repo, root)
    assert _digest(repo / "p.duckdb") == user_db
    assert _digest(snapshot) == snapped


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_the_run_waits_for_its_warehouse_cut_beside_it_and_stops_when_the_cut_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """The slice is cut while dbt starts: a slow cut holds the run at its first connection
    (the run then builds on the slice), a failed one stops it and its error is the verify's."""
    home, repo = _built_repo(tmp_path, monkeypatch)
    user_db = _digest(repo / "p.duckdb")
    snapshot = snapshot_database(repo / "p.duckdb", home / "snapshots" / "i1")
    place = preparation._place_warehouse

    def slow(*args: Any) -> tuple[Path | None, str]:
        """Cut a second after dbt says it is about to connect (its concurrency line comes
        right before its first connection), however long it took to get there."""
        log = args[0].scratch / "dbt_output.log"
        deadline = time.monotonic() + 120
        while "Concurrency:" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the run never got to its first connection"
            time.sleep(0.05)
        time.sleep(1)
        return place(*args)

    def broken(*args: Any) -> tuple[Path | None, str]:
        raise OSError("No space left on device")

    with DbtHarness(warm=warm) as harness:
        for number, cut in ((1, slow), (2, broken)):
            monkeypatch.setattr(preparation, "_place_warehouse", cut)
            root = create_worktree(repo, "HEAD", home / "worktrees" / f"c{number}")
            try:
                model = root / "models" / "stg.sql"
                model.write_text(model.read_text() + f"-- candidate {number}\n")
                workspace = Workspace(root=root, scratch=home / "sandboxes" / f"c{number}",
                                      snapshot=snapshot.parent)  # fmt: skip
                if cut is slow:
                    result = harness.verify(workspace, _event(repo, "stg"))
                    assert result.passed, result.output
                    assert "2 relation(s) the selection reads" in result.isolation
                    assert harness.last_breakdown_ms["dbt: warehouse wait"] >= 500
                    with duckdb.connect(str(root / "p.duckdb"), read_only=True) as con:
                        listed = "select table_name from information_schema.tables"
                        tables = {r[0] for r in con.execute(listed).fetchall()}
                    assert tables == {"stg", "events"}  # built in the slice, once it was cut
                    continue
                with pytest.raises(OSError, match="No space left on device"):
                    harness.verify(workspace, _event(repo, "stg"))
                log = (workspace.scratch / "dbt_output.log").read_text()
                assert "the sandbox warehouse could not be placed" in log
            finally:
                remove_worktree(repo, root)
    assert _digest(repo / "p.duckdb") == user_db

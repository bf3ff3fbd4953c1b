"""A run takes the root project's files from the failing run's parse when the harness knows
which differ (`tuning_files`), and builds what dbt reading every file would build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import BIN, commit_all, git

pytestmark = pytest.mark.slow

DAILY = Path("models") / "marts" / "daily_revenue.sql"
FLOOR = Path("models") / "marts" / "revenue_floor.sql"
SCHEMA = Path("models") / "marts" / "schema.yml"


@pytest.fixture
def failed_run(shop_repo: Path) -> UniversalFailureEvent:
    """A child of daily_revenue reads an env var; the user's run (SHOP_FLOOR=1) fails on a
    typo in daily_revenue. The incident recorded SHOP_FLOOR=2 (it changed since the parse)."""
    (shop_repo / FLOOR).write_text(
        "select *, {{ env_var('SHOP_FLOOR', '0') }} as floor from {{ ref('daily_revenue') }}\n"
    )
    daily = shop_repo / DAILY
    daily.write_text(daily.read_text().replace("sum(amount)", "sum(amout)"))
    commit_all(shop_repo, "revenue_floor; daily_revenue: typo")
    # the copied project's parse names the dir it was built in: the user's run parses here
    (shop_repo / "target" / "partial_parse.msgpack").unlink()
    started = datetime.now(UTC)
    args = ["build", "--select", "daily_revenue+"]
    res = subprocess.run(
        [str(BIN / "dbt"), *args, "--profiles-dir", str(shop_repo)], cwd=shop_repo,
        capture_output=True, text=True, env={**os.environ, "SHOP_FLOOR": "1"},
    )  # fmt: skip
    assert res.returncode == 1 and "amout" in res.stdout, res.stdout[-2000:]
    return UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.daily_revenue",
        repo_path=str(shop_repo), commit=git(shop_repo, "rev-parse", "HEAD"),
        artifacts={"manifest": str(shop_repo / "target" / "manifest.json"),
                   "run_results": str(shop_repo / "target" / "run_results.json")},
        dbt=DbtInvocation(command="build", args=args, project_dir=str(shop_repo),
                          cwd=str(shop_repo), started_utc=started, env={"SHOP_FLOOR": "2"}),
    )  # fmt: skip


def _candidate(repo: Path, home: Path, name: str, schema_too: bool = False) -> Workspace:
    snapshot = snapshot_database(repo / "shop.duckdb", home / "snapshots" / "inc")
    root = create_worktree(repo, "HEAD", worktrees_home() / f"inc-{name}")
    daily = root / DAILY
    daily.write_text(daily.read_text().replace("sum(amout)", "sum(amount)"))
    if schema_too:  # a properties file too: only dbt can say what that changes
        schema = root / SCHEMA
        schema.write_text(schema.read_text() + "\n# reviewed\n")
    return Workspace(root=root, scratch=home / "sandboxes" / "inc" / name, snapshot=snapshot.parent)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_files_from_the_parse_build_what_dbt_s_own_reading_builds(
    warm: bool, failed_run: UniversalFailureEvent, shop_repo: Path, _patchit_home: Path
) -> None:
    """The fix edits one model: the run takes the other files from the parse. The child whose
    env var changed is parsed again (dbt's own rule), from its text read when asked for."""
    right = _candidate(shop_repo, _patchit_home, "right")
    try:
        with DbtHarness(warm=warm) as harness:
            result = harness.verify(right, failed_run)
            assert result.passed, result.output
            assert harness.last_parse_mode == "partial"
            assert harness.last_files_from_saved, result.output
            # the warm worker's fork takes the graph it linked from the parse (a one-run
            # process links its own: it would link it once either way)
            assert harness.last_graph_from_saved == warm
        with duckdb.connect(str(right.root / "shop.duckdb"), read_only=True) as con:
            floors = con.execute("select distinct floor from revenue_floor").fetchall()
        assert floors == [(2,)]
    finally:
        remove_worktree(shop_repo, right.root)


def test_a_properties_file_edit_leaves_the_reading_to_dbt(
    failed_run: UniversalFailureEvent, shop_repo: Path, _patchit_home: Path
) -> None:
    both = _candidate(shop_repo, _patchit_home, "both", schema_too=True)
    try:
        with DbtHarness(warm=True) as harness:
            result = harness.verify(both, failed_run)
            assert result.passed, result.output
            assert harness.last_parse_mode == "partial"
            assert not harness.last_files_from_saved
    finally:
        remove_worktree(shop_repo, both.root)


_MAPS = """
import hashlib, json, sys
from patchit.harnesses.dbt import saved_parse
source, root = sys.argv[1], sys.argv[2]
digest = hashlib.sha256(open(source, "rb").read()).hexdigest()
spec = {"saved_parse": {"source": source, "sha256": digest, "root": root, "file": source}}
saved_parse.install()
saved_parse.preload(spec)  # the worker, decoding the parse: its edge maps built there
saved_parse.arm(spec)  # a run
kept = saved_parse._armed.manifest
built = kept.child_map
kept.build_parent_and_child_maps()  # dbt's first ask: the parse as saved
first_kept = kept.child_map is built
child = next(u for u, parents in kept.parent_map.items() if parents)
kept.nodes[child].depends_on.nodes.clear()  # dbt changes the parse
kept.build_parent_and_child_maps()
print(json.dumps([first_kept, kept.parent_map[child]]))
"""


def test_a_run_s_first_edge_maps_are_the_ones_built_on_decoding(shop_repo: Path) -> None:
    """The worker builds the kept parse's parent and child maps once; a run's first ask takes
    them, every later one builds them again from the parse as the run changed it."""
    parse = shop_repo / "target" / "partial_parse.msgpack"
    done = subprocess.run(
        [sys.executable, "-c", _MAPS, str(parse), str(shop_repo)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    first_kept, parents_after = json.loads(done.stdout.strip().splitlines()[-1])
    assert first_kept
    assert parents_after == []

"""A baseline built on a slice of the warehouse keeps saying so: a relation a candidate built
and the baseline did not (a model the fix edits, outside the incident's selection) is then
compared with the snapshot's, as on a whole copy, not called "missing in baseline". Found
in the corpus (`dbt_model_renamed_two_refs`): the right fix was escalated as NEEDS REVIEW
whenever its run added `state:modified+` and the baseline had run on a slice. Real dbt, real
git, real DuckDB."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.fidelity.baseline import BaselineRunner
from patchit.fidelity.dbt_check import compare_runs
from patchit.fidelity.outputs import BuiltNode, DbtOutputs, dbt_outputs
from patchit.harnesses.base import Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.harnesses.dbt.slice import SLICE_OF
from patchit.sandbox.snapshot import snapshot_database
from tests.conftest import commit_all, git, run_dbt
from tests.harnesses.test_dbt_slice_run import PROJECT as SLICE_PROJECT

pytestmark = pytest.mark.slow

# the slice run test's project, with `orders` over `stg` in place of its incremental and legacy
PROJECT = {
    **{
        k: v
        for k, v in SLICE_PROJECT.items()
        if k not in ("models/events.sql", "models/legacy.sql")
    },
    "models/orders.sql": "select id from {{ ref('stg') }}\n",
}


def test_a_sliced_baseline_is_filled_from_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("PATCHIT_HOME", str(home))
    repo = tmp_path / "repo"
    for rel, text in PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    assert run_dbt(repo, "build").returncode == 0
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb*\n")
    git(repo, "init", "-q", "-b", "main")
    good = commit_all(repo, "p")
    (repo / "models/orders.sql").write_text("select idd from {{ ref('stg') }}\n")
    failing = commit_all(repo, "orders: a typo")
    snapshot = snapshot_database(repo / "p.duckdb", home / "snapshots" / "i1")
    event = UniversalFailureEvent(
        source="dbt", pipeline_id="p", unit_id="model.p.orders", repo_path=str(repo),
        commit=failing, artifacts={"manifest": str(repo / "target" / "manifest.json")},
        dbt=DbtInvocation(command="build", args=["build"], project_dir=str(repo), cwd=str(repo)),
    )  # fmt: skip

    with DbtHarness(warm=False) as harness:
        runner = BaselineRunner(event, repo, harness, snapshot.parent, home / "baseline")
        baseline, why = runner.first(good)
        assert baseline is not None, why
        [run] = baseline.runs
        assert "relation(s) the selection reads" in run.isolation  # it ran on a slice
        assert run.outputs.get(SLICE_OF)
        base = dbt_outputs(Workspace(root=repo, scratch=home / "x"), event, run, keep=None)
    assert base.slice_of is not None and "model.p.unrelated" not in base.nodes

    # a candidate that also built `unrelated` (a model it edits), on a whole copy
    cand_db = tmp_path / "cand" / "p.duckdb"
    cand_db.parent.mkdir()
    shutil.copy(snapshot, cand_db)
    nodes = dict(base.nodes)
    nodes["model.p.unrelated"] = BuiltNode("model.p.unrelated", "main", "unrelated",
                                           "select 1 as x", "models/unrelated.sql", [])  # fmt: skip
    compared = compare_runs(base, DbtOutputs(duckdb=cand_db, nodes=nodes))
    unrelated = compared["model.p.unrelated"].raw
    assert unrelated.base is not None and not unrelated.differs
    with duckdb.connect(str(snapshot), read_only=True) as con:  # the snapshot is only read
        assert con.execute("select x from main.unrelated").fetchall() == [(1,)]

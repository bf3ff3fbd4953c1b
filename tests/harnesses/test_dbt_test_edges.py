"""The worker's test edges for a selection of tests are dbt's own (`Linker.add_test_edges_1`)
from those tests, edge for edge, on random graphs shaped like dbt projects: sources, models,
seeds, single- and multi-node tests (relationships), a test on a source, a test whose parent
is not in the graph; and a real `dbt build` of a selection, whose failing test skips what waits
for it, ends the same with the worker's tuning as without it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from patchit.harnesses.dbt.subset import selected_test_edges

pytestmark = pytest.mark.slow  # imports dbt


def _project(rng: random.Random) -> tuple[Any, Any]:
    from dbt.artifacts.resources.types import NodeType
    from dbt.compilation import Linker

    linker = Linker()
    nodes: dict[str, Any] = {}
    child_map: dict[str, list[str]] = {}
    sources = [f"source.p.raw.s{i}" for i in range(rng.randint(0, 4))]
    for source in sources:
        linker.add_node(source)
        child_map[source] = []
    built: list[str] = []
    for i in range(rng.randint(1, 40)):
        kind = rng.choice(["model", "model", "model", "seed"])
        unique_id = f"{kind}.p.n{i}"
        pool = sources + built
        parents = [] if kind == "seed" else rng.sample(pool, rng.randint(0, min(3, len(pool))))
        nodes[unique_id] = SimpleNamespace(resource_type=NodeType(kind), depends_on_nodes=parents)
        linker.add_node(unique_id)
        child_map[unique_id] = []
        for parent in parents:
            linker.dependency(unique_id, parent)
            child_map[parent].append(unique_id)
        built.append(unique_id)
    upstream = sources + built
    for i in range(rng.randint(0, 30)):
        unique_id = f"test.p.t{i}"
        depends = rng.sample(upstream, rng.choice([1, 1, 2, 2, 3]) if len(upstream) > 2 else 1)
        nodes[unique_id] = SimpleNamespace(resource_type=NodeType.Test, depends_on_nodes=depends)
        linker.add_node(unique_id)
        child_map[unique_id] = []
        for parent in depends:
            linker.dependency(unique_id, parent)
            child_map[parent].append(unique_id)
    if rng.random() < 0.2:  # a test that names a node the graph does not have
        nodes["test.p.orphan"] = SimpleNamespace(
            resource_type=NodeType.Test, depends_on_nodes=[built[0], "model.p.gone"]
        )
        child_map[built[0]].append("test.p.orphan")
    return linker, SimpleNamespace(nodes=nodes, child_map=child_map)


@pytest.mark.parametrize("seed", range(60))
def test_the_same_edges_as_dbt_from_the_selected_tests(seed: int) -> None:
    from dbt.compilation import Linker

    rng = random.Random(seed)
    linker, manifest = _project(rng)
    expected = linker.graph.copy()
    dbt_linker = Linker()
    dbt_linker.graph = expected
    dbt_s = getattr(Linker.add_test_edges_1, "dbt_original", Linker.add_test_edges_1)
    dbt_s(dbt_linker, manifest)
    added = set(expected.edges) - set(linker.graph.edges)
    for edge in added:
        assert expected.edges[edge] == {"edge_type": "parent_test"}
    tests = sorted(name for name in manifest.nodes if name.startswith("test."))
    assert set(selected_test_edges(linker.graph, manifest, linker.graph)) == added
    for _ in range(5):
        others = {node for node in linker.graph if not node.startswith("test.")}
        selected = set(rng.sample(tests, rng.randint(0, len(tests)))) | others
        want = {(test, node) for test, node in added if test in selected}
        assert set(selected_test_edges(linker.graph, manifest, selected)) == want
        # with some test edges in the graph already, the same edges
        partial = linker.graph.copy()
        partial.add_edges_from(rng.sample(sorted(added), len(added) // 2))
        assert set(selected_test_edges(partial, manifest, selected)) == want


_RUN = """
import json, sys
from dbt.cli.main import dbtRunner
if sys.argv[1] == "tuned":
    from patchit.harnesses.dbt import tuning as dbt_tuning
    dbt_tuning.install()
res = dbtRunner().invoke(sys.argv[2:])
rows = res.result.results
print(json.dumps({r.node.unique_id: str(getattr(r.status, "value", r.status)) for r in rows}))
"""


def _build(project: Path, mode: str, select: str) -> dict[str, str]:
    args = ["build", "--select", select, "--project-dir", str(project)]
    args += ["--profiles-dir", str(project), "--target-path", str(project / f"target-{mode}")]
    args += ["--log-path", str(project / "logs"), "--threads", "1"]
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, mode, *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    statuses: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return statuses


def test_a_build_of_a_selection_runs_and_skips_what_dbt_does(tmp_path: Path) -> None:
    """`a` has a failing test; `b` (downstream) waits for it and is skipped, as is `c`; a
    relationships test between `b` and `a` waits too. Unselected tests (on `up`) add nothing."""
    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: p\nprofile: p\nconfig-version: 2\nmodels:\n  p:\n    +materialized: table\n"
    )
    (project / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: p.duckdb\n"
    )
    models = {
        "up": "select 1 as id",
        "a": "select id, cast(null as integer) as v from {{ ref('up') }}",
        "b": "select id from {{ ref('a') }}",
        "c": "select id from {{ ref('b') }}",
        "side": "select id from {{ ref('up') }}",
    }
    for name, sql in models.items():
        (project / "models" / f"{name}.sql").write_text(sql + "\n")
    (project / "models" / "schema.yml").write_text(
        "version: 2\nmodels:\n"
        "  - name: up\n    columns:\n      - name: id\n        data_tests: [not_null, unique]\n"
        "  - name: a\n    columns:\n      - name: v\n        data_tests: [not_null]\n"
        "  - name: b\n    columns:\n      - name: id\n        data_tests:\n"
        "          - relationships: {to: ref('a'), field: id}\n"
    )
    for select in ("up+", "a+", "b+"):  # up+ first: it builds `up`, which a+ reads
        dbt_s = _build(project, "plain", select)
        assert _build(project, "tuned", select) == dbt_s
        if select == "a+":  # the case this is about: a failing test skips what waits for it
            failed = [k for k, v in dbt_s.items() if v == "fail"]
            assert [k.split(".")[2] for k in failed] == ["not_null_a_v"]
            assert dbt_s["model.p.b"] == "skipped"
            assert dbt_s["model.p.c"] == "skipped"

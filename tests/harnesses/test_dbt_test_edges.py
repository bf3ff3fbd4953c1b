"""The worker's test edges are dbt's own (`Linker.add_test_edges_1`), edge for edge, on
random graphs shaped like dbt projects: sources, models, seeds, single- and multi-node tests
(relationships), a test on a source, a test whose parent is not in the graph."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from patchit.harnesses.dbt.tuning import test_edges as worker_test_edges

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
def test_the_same_edges_as_dbt(seed: int) -> None:
    from dbt.compilation import Linker

    linker, manifest = _project(random.Random(seed))
    expected = linker.graph.copy()
    dbt_linker = Linker()
    dbt_linker.graph = expected
    dbt_s = getattr(Linker.add_test_edges_1, "dbt_original", Linker.add_test_edges_1)
    dbt_s(dbt_linker, manifest)
    added = set(expected.edges) - set(linker.graph.edges)
    assert set(worker_test_edges(linker.graph, manifest)) == added
    for test, node in added:
        assert expected.edges[test, node] == {"edge_type": "parent_test"}

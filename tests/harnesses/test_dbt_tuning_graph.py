"""`tuning_graph`: a run on the kept parse takes the graph the worker linked, relinking what
changed, and gets dbt's graph; and dbt's own link, and error, whenever that cannot be vouched
for."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harnesses.test_dbt_tuning import DIAMOND, on_parsed_project

pytestmark = pytest.mark.slow

_GRAPH = """
import copy, json, sys
from dbt.cli.main import dbtRunner
from dbt.compilation import Linker
from patchit.harnesses.dbt import tuning, tuning_graph
manifest = dbtRunner().invoke(sys.argv[1:]).result
tuning.install()
tuning.install()  # twice, as a worker may: one replacement
dbt_s = Linker.link_graph.dbt_original
assert not hasattr(dbt_s, "dbt_original")
def dbts(m):
    linker = Linker()
    try:
        dbt_s(linker, m)
    except Exception as exc:
        return [type(exc).__name__, str(exc)]
    return linker.graph
def ours(m):
    linker = Linker()
    try:
        linker.link_graph(m)
    except Exception as exc:
        return [type(exc).__name__, str(exc)], tuning_graph.taken_last()
    return linker.graph, tuning_graph.taken_last()
def same(got, want):
    if isinstance(want, list) or isinstance(got, list):
        return got == want
    return (sorted(got.nodes) == sorted(want.nodes) and sorted(got.edges) == sorted(want.edges)
            and len(got.edges) == len(want.edges))
def replaced(m, unique_id, nodes):  # as a partial parse does: a new node in the old one's place
    node = copy.deepcopy(m.nodes[unique_id])
    node.depends_on.nodes = nodes
    m.nodes[unique_id] = node
found = {}
tuning_graph.remember(manifest)
kept = tuning_graph._kept.graph
graph, taken = ours(manifest)
found["unchanged"] = [taken, graph is kept, same(graph, dbts(manifest))]
graph, taken = ours(manifest)  # a second link in one process: dbt's own
found["again"] = [taken, graph is kept, same(graph, dbts(manifest))]
tuning_graph.remember(manifest)
replaced(manifest, "model.p.d", ["model.p.b", "source.p.raw.events"])
graph, taken = ours(manifest)
found["changed"] = [taken, same(graph, dbts(manifest)), sorted(graph.predecessors("model.p.d"))]
for name, nodes in (("cycle", ["model.p.d"]), ("missing", ["model.p.gone"])):
    tuning_graph.remember(manifest)
    before = manifest.nodes["model.p.a"]
    replaced(manifest, "model.p.a", nodes)
    got, taken = ours(manifest)
    found[name] = [taken, same(got, dbts(manifest)), got[0]]
    manifest.nodes["model.p.a"] = before
tuning_graph.remember(manifest)
added = copy.deepcopy(manifest.nodes["model.p.c"])
added.unique_id = "model.p.e"
manifest.nodes["model.p.e"] = added
graph, taken = ours(manifest)
found["added"] = [taken, same(graph, dbts(manifest)), "model.p.e" in graph]
tuning_graph.remember(manifest)
b = manifest.nodes.pop("model.p.b")  # d depends on b: dbt's error
del manifest.nodes["model.p.e"]
graph, taken = ours(manifest)
found["removed"] = [taken, same(graph, dbts(manifest)), graph[0]]
manifest.nodes["model.p.b"] = b
tuning_graph.remember(manifest)
other = copy.deepcopy(manifest)
graph, taken = ours(other)
found["another manifest"] = [taken, same(graph, dbts(other))]
print(json.dumps(found))
"""


def test_the_kept_graph_is_dbt_s_and_anything_else_is_linked_by_dbt(tmp_path: Path) -> None:
    files = {
        **DIAMOND,
        "models/props.yml": (
            "version: 2\nsources:\n  - name: raw\n    tables:\n      - name: events\n"
            "models:\n  - name: a\n    columns:\n      - name: id\n        tests: [not_null]\n"
        ),
    }
    found = on_parsed_project(tmp_path, _GRAPH, files)
    assert found["unchanged"] == [True, True, True]
    assert found["again"] == [False, False, True]
    # d's dependencies changed: relinked, dbt's graph
    assert found["changed"] == [True, True, ["model.p.b", "source.p.raw.events"]]
    # a changed member that does not link: dbt's link from nothing, and dbt's own error
    taken, same, error = found["cycle"]
    assert [taken, same, error] == [False, True, "RuntimeError"]
    taken, same, error = found["missing"]
    assert [taken, same, error] == [False, True, "GraphDependencyNotFoundError"]
    # members added, removed, or another manifest than the kept one: dbt's own link
    assert found["added"] == [False, True, True]
    assert found["removed"] == [False, True, "GraphDependencyNotFoundError"]
    assert found["another manifest"] == [False, True]

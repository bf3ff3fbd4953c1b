"""The run's part of dbt's graph, made from the selection rather than from a copy of the whole.

dbt's `Graph.get_subset_graph(selected)` copies the project's whole graph (on a `dbt build`,
with every test -> node edge dbt adds: 560,000 edges on a 2,000-model project), strips the
unselected nodes at its edges layer by layer, and removes each unselected node left inside,
linking its parents to its children. A warm run on 2,000 models spent a third of its time
there, to queue a selection of a few dozen nodes.

`subset_graph` gives the same graph from the selection: the selected nodes (with their data,
in the graph's order), every edge between two of them (with its data), and an edge (without
data) from a selected node to each selected node it reaches through unselected nodes only
(what removing those nodes one by one leaves), never from a node to itself. The nodes a
search passes through are remembered, so each unselected node is searched once.

The graph a warm build compiles has no test edges yet (`dbt_tuning`): `selected_test_edges`
gives the selected tests theirs, the same dbt's `add_test_edges_1` gives them, from each
test's few upstream nodes rather than from every node's ancestors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def subset_graph(graph: Any, selected: Iterable[str]) -> Any:
    """`graph` (a networkx DiGraph) cut down to `selected` as dbt's `get_subset_graph` does;
    ValueError naming a selected node the graph does not have."""
    include = set(selected)
    for node in include:
        if node not in graph:
            raise ValueError(f"Couldn't find model '{node}' -- does it exist or is it disabled?")
    subset = graph.__class__()
    subset.graph.update(graph.graph)
    subset.add_nodes_from((node, graph.nodes[node]) for node in graph if node in include)
    for node in subset:
        for child, data in graph.adj[node].items():
            if child in include and child != node:
                subset.add_edge(node, child, **data)
    reached: dict[str, frozenset[str]] = {}  # unselected node -> selected nodes it reaches
    for node in subset:
        for child in graph.successors(node):
            if child in include:
                continue
            for target in _reaches(graph, include, child, reached):
                if target != node and not subset.has_edge(node, target):
                    subset.add_edge(node, target)
    return subset


def _reaches(
    graph: Any, include: set[str], start: str, reached: dict[str, frozenset[str]]
) -> frozenset[str]:
    """The selected nodes `start` (unselected) reaches through unselected nodes only."""
    stack: list[tuple[str, bool]] = [(start, False)]
    while stack:
        node, children_done = stack.pop()
        if node in reached:
            continue
        if children_done:
            found: set[str] = set()
            for child in graph.successors(node):
                if child in include:
                    found.add(child)
                else:
                    found |= reached[child]
            reached[node] = frozenset(found)
            continue
        stack.append((node, True))
        stack.extend(
            (child, False)
            for child in graph.successors(node)
            if child not in include and child not in reached
        )
    return reached[start]


def selected_test_edges(
    graph: Any, manifest: Any, selected: Iterable[str]
) -> list[tuple[str, str]]:
    """The (test, node) edges dbt's `Linker.add_test_edges_1` gives the tests among
    `selected`, to every node of the graph (not only the selected ones): a test -> node edge
    when the node (a non-test node of the manifest) is downstream of a node the test is a
    test of (the test is in its `manifest.child_map`) and of every node the test depends on.

    `graph` holds the project's dependencies without test edges (or with some: a test edge
    leads only where dependencies lead already, so descendants are the same either way)."""
    from dbt.artifacts.resources.types import NodeType

    descendants: dict[str, set[str]] = {}

    def below(node: str) -> set[str]:
        if node not in descendants:
            descendants[node] = _descendants(graph, node)
        return descendants[node]

    edges: list[tuple[str, str]] = []
    for test in sorted(set(selected)):
        entry = manifest.nodes.get(test)
        if entry is None or entry.resource_type != NodeType.Test:
            continue
        depends_on = set(entry.depends_on_nodes)
        if not depends_on or not all(name in graph for name in depends_on):
            continue  # never all upstream of a node
        of = [name for name in depends_on if test in manifest.child_map.get(name, ())]
        if not of:
            continue
        reach = set().union(*(below(name) for name in of))
        for name in depends_on:
            reach &= below(name)
        for node in sorted(reach):
            target = manifest.nodes.get(node)
            if target is not None and target.resource_type != NodeType.Test:
                edges.append((test, node))
    return edges


def _descendants(graph: Any, start: str) -> set[str]:
    """Every node reachable from `start` in `graph`, `start` left out."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for child in graph.successors(stack.pop()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    seen.discard(start)
    return seen

"""What the warm dbt worker changes in how dbt links a run's graph (see `tuning` for the rest).

Every run links the project's whole graph (`Linker.link_graph`: a networkx node for every
source, node, semantic model, exposure, function, metric, unit test and saved query, and an
edge for every dependency; some 4,500 nodes and 5,700 edges on a 2,000-model project, about
50 ms of a warm run), though a candidate changes the dependencies of a few nodes at most.

The worker links the kept parse's graph once, with dbt's own `link_graph`, when it decodes the
parse (`remember`), and notes every member's dependencies. A run on that manifest (a fork of
the worker, holding a copy of the graph of its own) takes the linked graph when its members
are the ones noted: a member whose dependencies changed loses its edges and is linked again
by dbt's `link_node`, and the graph's cycle check runs as dbt's does. A run whose members are
not the noted ones (a member added, removed or disabled), or whose changed members do not
link (a dependency that is not there, a cycle), gets dbt's own link from nothing, and dbt's
own error. The graph is the one dbt links: the same nodes and edges (a changed member's edges
are later in networkx's order, which nothing in a run reads: its queue orders nodes by depth,
then by name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patchit.harnesses.dbt.tuning_base import replace_once

# the members dbt's `link_graph` links with `link_node`, in its order (sources: nodes only)
_MEMBERS = (
    "nodes", "semantic_models", "exposures", "functions", "metrics", "unit_tests",
    "saved_queries",
)  # fmt: skip


@dataclass
class _Kept:
    manifest: Any
    graph: Any  # networkx's DiGraph, as dbt linked it
    sources: frozenset[str]
    depends: dict[str, tuple[str, ...]]  # member -> its dependencies, as linked
    taken: bool = False  # a process takes it once (a fork takes its own copy)


_kept: _Kept | None = None
_taken_last = False  # whether the last link took the kept graph (for the worker's reply)


def install() -> None:
    try:
        from dbt.compilation import Linker
    except ImportError:
        return
    replace_once(Linker, "link_graph", _from_kept, layer="kept graph")


def remember(manifest: Any) -> None:
    """In the worker, once a saved parse is decoded: its graph, linked by dbt, and its
    members' dependencies. A manifest dbt cannot link (a cycle, a missing node) is not kept."""
    global _kept
    _kept = None
    from dbt.compilation import Linker

    linker = Linker()
    linker.link_graph(manifest)  # dbt's own: nothing is kept yet
    sources, depends = _members(manifest)
    _kept = _Kept(manifest, linker.graph, sources, depends)


def taken_last() -> bool:
    return _taken_last


def _members(manifest: Any) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    depends: dict[str, tuple[str, ...]] = {}
    for name in _MEMBERS:
        for unique_id, member in getattr(manifest, name).items():
            depends[unique_id] = tuple(member.depends_on_nodes)
    return frozenset(manifest.sources), depends


def _from_kept(link_graph: Any) -> Any:
    def link_graph_from_kept(self: Any, manifest: Any) -> Any:
        global _taken_last
        _taken_last = False
        kept = _kept
        if kept is None or kept.taken or manifest is not kept.manifest:
            return link_graph(self, manifest)
        kept.taken = True  # whatever follows changes the graph: never taken twice
        sources, depends = _members(manifest)
        if sources != kept.sources or depends.keys() != kept.depends.keys():
            return link_graph(self, manifest)
        changed = [uid for uid, nodes in depends.items() if kept.depends[uid] != nodes]
        graph = kept.graph
        for unique_id in changed:
            graph.remove_edges_from(list(graph.in_edges(unique_id)))
        self.graph = graph
        _taken_last = True
        if not changed:
            return None  # dbt's graph of these members, checked for cycles when linked
        try:
            for unique_id in changed:
                self.link_node(_member(manifest, unique_id), manifest)
            linked = not self.find_cycles()
        except Exception:  # a dependency that is not there: dbt's own error, below
            linked = False
        if not linked:  # dbt's link from nothing, and its own error for what is wrong
            _taken_last = False
            self.graph = type(graph)()
            return link_graph(self, manifest)
        return None

    return link_graph_from_kept


def _member(manifest: Any, unique_id: str) -> Any:
    for name in _MEMBERS:
        member = getattr(manifest, name).get(unique_id)
        if member is not None:
            return member
    raise KeyError(unique_id)

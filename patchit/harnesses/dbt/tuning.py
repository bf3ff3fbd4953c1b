"""What the warm dbt worker changes in dbt's own code, once, before it serves any run.

None of it changes what a run builds or how it is judged:

- dbt's writers of artifacts nothing reads in a sandbox run are skipped: the whole manifest,
  serialised twice a run (after parsing, and after running), the pickled graph with every
  node serialised again, and a diagnostic summary of the graph; on a 200-model project that
  was a third of a warm run. The worker writes the run's own nodes instead
  (`worker._write_run_nodes`).
- A run's part of the graph is made from its selection (`subset`), not by copying the
  project's whole graph and removing the rest; the same graph either way.
- The graph's cycle check asks networkx whether the graph is acyclic first (a topological
  sort), and only walks it for the cycle's path when it is not: the same answer, for a
  fraction of the walk.
- The edges that make a node wait for the tests upstream of it (dbt's `add_test_edges_1`:
  a test -> node edge when everything the test depends on is upstream of the node) are the
  same edges, found from each node's descendants computed once in topological order (as bit
  sets): a test's edges are the common descendants of the nodes it depends on, as many steps
  as edges (560,000 on a 2,000-model project), instead of a breadth-first walk per node.
  dbt's own faster variant
  (`--use-fast-test-edges`) is not used: it gives other edges (a model fed by a source never
  waits for a relationships test upstream of it).
- Each run records whether dbt parsed partially (`parse_mode`): warm runs do not write
  dbt's debug log, where the harness used to look for it.
- The failing run's saved parse is decoded once per worker (`saved_parse`).
- The `graph` context variable (every node serialised: `flat_graph`) is built when a run
  first reads it, not after every parse.
- Two costs every invocation paid again whatever the project: the modules dbt scans the
  whole of `sys.path` for (its plugins, `dbt_*` packages) are found once per worker, and a
  behaviour flag's default source (the module that declared it) is read from the caller's
  frame globals instead of `inspect.stack()`, which reads the source file of every frame.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from patchit.harnesses.dbt import saved_parse as dbt_saved_parse
from patchit.harnesses.dbt.flat_graph import lazy_build_flat_graph
from patchit.harnesses.dbt.subset import subset_graph

_parse_mode: str | None = None  # of this process's (this fork's) latest parse


def forget_parse_mode() -> None:
    """At the start of a run (a fork inherits the worker's last value)."""
    global _parse_mode
    _parse_mode = None


def parse_mode() -> str:
    """ "partial" or "full" for the run's parse; "unknown" when it did not get that far."""
    return _parse_mode or "unknown"


def install() -> None:
    _without_unread_artifacts()
    _acyclic_first()
    _test_edges_from_ancestors()
    _recording_parse_mode()
    _plugins_found_once()
    _flat_graph_on_first_read()
    _subset_from_selection()
    _flag_source_from_frames()
    dbt_saved_parse.install()


def _skip_write(*_args: Any, **_kwargs: Any) -> None:
    """Stands in for dbt's writers of the artifacts nothing reads in a sandbox run."""


def _no_summary(*_args: Any, **_kwargs: Any) -> dict[int, dict[str, Any]]:
    """dbt's diagnostic summary of the graph (walked twice a build), left empty."""
    return {}


def _without_unread_artifacts() -> None:
    for module in ("dbt.parser.manifest", "dbt.task.runnable"):
        with contextlib.suppress(ImportError):
            mod = importlib.import_module(module)
            if hasattr(mod, "write_manifest"):
                setattr(mod, "write_manifest", _skip_write)  # noqa: B010
    with contextlib.suppress(ImportError):
        compilation = importlib.import_module("dbt.compilation")
        if hasattr(compilation.Compiler, "write_graph_file"):
            compilation.Compiler.write_graph_file = _skip_write
        if hasattr(compilation.Linker, "get_graph_summary"):  # graph_summary.json's contents
            compilation.Linker.get_graph_summary = _no_summary


def _replace_once(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    """`owner.name` becomes `make(original)`, once (a second install leaves it); the
    replacement keeps dbt's own as `dbt_original`."""
    original = getattr(owner, name)
    if getattr(original, "_patchit", False):
        return
    replacement = make(original)
    replacement._patchit = True
    replacement.dbt_original = original
    setattr(owner, name, replacement)


def _acyclic_first() -> None:
    """`Linker.find_cycles` returns None at once for an acyclic graph."""
    try:
        import networkx
        from dbt.compilation import Linker
    except ImportError:
        return

    def make(find_cycles: Any) -> Any:
        def acyclic_first(self: Any) -> Any:
            if networkx.is_directed_acyclic_graph(self.graph):
                return None
            return find_cycles(self)

        return acyclic_first

    _replace_once(Linker, "find_cycles", make)


def _subset_from_selection() -> None:
    """`Graph.get_subset_graph` made from the selection (`subset`), not a whole copy."""
    try:
        from dbt.graph.graph import Graph
    except ImportError:
        return

    def make(_dbt_s: Any) -> Any:
        def get_subset_graph(self: Any, selected: Any) -> Any:
            return Graph(subset_graph(self.graph, selected))

        return get_subset_graph

    _replace_once(Graph, "get_subset_graph", make)


def _flat_graph_on_first_read() -> None:
    """`Manifest.build_flat_graph` leaves a `LazyFlatGraph` (see `flat_graph`)."""
    try:
        from dbt.contracts.graph.manifest import Manifest
    except ImportError:
        return
    _replace_once(Manifest, "build_flat_graph", lazy_build_flat_graph)


def _plugins_found_once() -> None:
    """dbt's plugin manager scans every module on `sys.path` for a `dbt_` prefix at each
    invocation; the worker's modules do not change between runs, so once is enough."""
    try:
        from dbt.plugins.manager import PluginManager
    except ImportError:
        return
    found: dict[str, Any] = {}

    def make(scan: Any) -> Any:
        def found_once(cls: Any) -> Any:
            if not found:
                found.update(scan.__func__(cls))
            return dict(found)

        return classmethod(found_once)

    raw = PluginManager.__dict__.get("get_prefixed_modules")
    if isinstance(raw, classmethod) and not getattr(raw.__func__, "_patchit", False):
        replacement = make(raw)
        replacement.__func__._patchit = True
        PluginManager.get_prefixed_modules = replacement  # type: ignore[method-assign]


def _flag_source_from_frames() -> None:
    """`BehaviorFlagRendered._default_source`: the first module up the stack that is not the
    flags module itself, as dbt finds it, named from each frame's globals."""
    try:
        from dbt_common import behavior_flags
    except ImportError:
        return
    own = behavior_flags.__name__

    def default_source() -> str:
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_globals.get("__name__")
            if isinstance(name, str) and name != own:
                return name
            frame = frame.f_back  # type: ignore[assignment]
        return "Unknown"

    rendered = behavior_flags.BehaviorFlagRendered
    if not getattr(rendered._default_source, "_patchit", False):
        default_source._patchit = True  # type: ignore[attr-defined]
        rendered._default_source = staticmethod(default_source)  # type: ignore[method-assign]


def _recording_parse_mode() -> None:
    """After each `ManifestLoader.load`, `parse_mode` says whether it parsed partially."""
    try:
        from dbt.parser.manifest import ManifestLoader
    except ImportError:
        return

    def make(load: Any) -> Any:
        def recording_load(self: Any) -> Any:
            global _parse_mode
            manifest = load(self)
            partial = bool(getattr(self, "partially_parsing", False))
            _parse_mode = "partial" if partial or getattr(self, "skip_parsing", False) else "full"
            return manifest

        return recording_load

    _replace_once(ManifestLoader, "load", make)


def _test_edges_from_ancestors() -> None:
    try:
        from dbt.compilation import Linker
    except ImportError:
        return

    def add_test_edges_1(self: Any, manifest: Any) -> None:
        graph = self.graph
        graph.add_edges_from(test_edges(graph, manifest), edge_type="parent_test")

    _replace_once(Linker, "add_test_edges_1", lambda _dbt_s: add_test_edges_1)


def test_edges(graph: Any, manifest: Any) -> list[tuple[str, str]]:
    """The (test, node) edges dbt's `Linker.add_test_edges_1` adds to `graph`: for every
    non-test node of the manifest, each test of one of its ancestors (a `test.` child in
    `manifest.child_map`) whose `depends_on` nodes are all its ancestors."""
    import networkx
    from dbt.artifacts.resources.types import NodeType

    bit: dict[str, int] = {}
    for index, node in enumerate(networkx.topological_sort(graph)):
        bit[node] = 1 << index
    tested: dict[str, int] = {}  # test -> the bits of the nodes it is a test of
    for parent, children in manifest.child_map.items():
        for child in children:
            if child.startswith("test.") and parent in bit:
                tested[child] = tested.get(child, 0) | bit[parent]
    order = list(bit)  # bit index -> node
    descendants: dict[str, int] = {}  # node -> the bits of every node downstream of it
    for node in reversed(order):
        downstream = 0
        for child in graph.successors(node):
            downstream |= descendants[child] | bit[child]
        descendants[node] = downstream
    targets = 0  # the bits of the manifest's non-test nodes
    for node in order:
        entry = manifest.nodes.get(node)
        if entry is not None and entry.resource_type != NodeType.Test:
            targets |= bit[node]
    # A node gets an edge from a test when one node the test is a test of, and every node it
    # depends on, is upstream of it: the test's edges are those nodes' common descendants,
    # found per test (as many steps as edges) rather than per node and test.
    edges: list[tuple[str, str]] = []
    for test, of in tested.items():
        depends_on = set(manifest.nodes[test].depends_on_nodes)
        if not all(name in bit for name in depends_on):
            continue  # never all upstream of a node
        reach = 0
        for index in _set_bits(of):
            reach |= descendants[order[index]]
        reach &= targets
        for name in depends_on:
            reach &= descendants[name]
        edges += [(test, order[index]) for index in _set_bits(reach)]
    return edges


def _set_bits(bits: int) -> Iterator[int]:
    """The indices of the bits set in `bits`, lowest first."""
    while bits:
        lowest = bits & -bits
        yield lowest.bit_length() - 1
        bits ^= lowest

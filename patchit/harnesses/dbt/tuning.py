"""What the warm dbt worker changes in dbt's own code, once, before it serves any run.

None of it changes what a run builds or how it is judged:

- dbt's writers of artifacts nothing reads in a sandbox run are skipped: the whole manifest,
  serialised twice a run (after parsing, and after running), the pickled graph with every
  node serialised again, and a diagnostic summary of the graph; on a 200-model project that
  was a third of a warm run. The worker writes the run's own nodes instead
  (`dbt_worker._write_run_nodes`).
- A run's part of the graph is made from its selection (`dbt_subset`), not by copying the
  project's whole graph and removing the rest; the same graph either way.
- The graph's cycle check asks networkx whether the graph is acyclic first (a topological
  sort), and only walks it for the cycle's path when it is not: the same answer, for a
  fraction of the walk.
- The edges that make a node wait for the tests upstream of it (dbt's `add_test_edges_1`:
  a test -> node edge when everything the test depends on is upstream of the node) are added
  only for the tests the run selected (`dbt_subset.selected_test_edges`), when the selection
  is known, instead of for every test of the project (560,000 edges on a 2,000-model
  project, for a run of a few dozen nodes). The others change nothing a run does: a test
  edge leads only where dependencies lead already, so an unselected test's edges add no
  order between selected nodes, and only a test that runs can fail and skip the nodes that
  wait for it (dbt's `_mark_dependent_errors`, which walks the whole graph: a selected test
  gets all its edges, to selected nodes or not). dbt's node selection ignores test edges.
  dbt's own faster variant (`--use-fast-test-edges`) is not used: it gives other edges (a
  model fed by a source never waits for a relationships test upstream of it).
- An event at debug level that nothing would take (every logger above debug, no callback but
  dbt's own tracker of behaviour-change warnings) is not built: dbt builds every event's
  protobuf message before its loggers drop it, and filling the relation cache fires one per
  relation in the warehouse (2,000 messages on a 2,000-model project, most of the cache's
  time); nor is one made elsewhere before it is fired (`tuning_events`). With `--debug` or
  a debug log file, every event is built as before.
- The schemas whose relations fill the cache are found from one node per schema, not by
  making every node's relation (2,000 on a 2,000-model project) to drop its name: where the
  adapter makes relations as dbt's base class or dbt-duckdb's does, a node's schema relation
  depends only on its database, schema, catalog, quoting and kind, so nodes alike in those give
  the same one.
- Each run records whether dbt parsed partially (`parse_mode`): warm runs do not write
  dbt's debug log, where the harness used to look for it.
- The failing run's saved parse is decoded once per worker (`dbt_saved_parse`), and the root
  project's files are taken from it where the harness knows which differ (`tuning_files`).
- The edge maps dbt asks for twice in a parse without reading them are built when read
  (`tuning_maps`).
- A run on the kept parse takes the graph the worker linked from it, relinking only the
  members whose dependencies changed (`tuning_graph`).
- A node's Jinja context is made with its macros filed and merged in one pass each
  (`tuning_jinja`), and a result table's type tester reuses the date parser's locale tables
  (`tuning_types`): each only where a probe shows the result is what dbt's own code makes.
- The JSON schemas dbt validates configs against are made once per install of dbt, not once
  per process (`tuning_schemas`).
- The `graph` context variable (every node serialised: `dbt_flat_graph`) is built when a run
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
from typing import Any

from patchit.harnesses.dbt import saved_parse as dbt_saved_parse
from patchit.harnesses.dbt import (
    tuning_events,
    tuning_files,
    tuning_graph,
    tuning_jinja,
    tuning_maps,
    tuning_parse,
    tuning_schemas,
    tuning_types,
)
from patchit.harnesses.dbt.flat_graph import lazy_build_flat_graph
from patchit.harnesses.dbt.subset import selected_test_edges, subset_graph
from patchit.harnesses.dbt.tuning_base import replace_once as _replace_once

_parse_mode: str | None = None  # of this process's (this fork's) latest parse
# On a build's graph (the networkx graph object): the manifest whose test edges are not added
# yet; `get_subset_graph` adds those of the selected tests.
PENDING_TEST_EDGES = "_patchit_pending_test_edges"


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
    _test_edges_of_the_selection()
    _recording_parse_mode()
    _plugins_found_once()
    _flat_graph_on_first_read()
    _subset_from_selection()
    _flag_source_from_frames()
    _debug_events_only_when_taken()
    tuning_events.build_debug_events_when_read()
    _cache_schemas_once_per_schema()
    dbt_saved_parse.install()
    tuning_maps.install()  # after the saved parse's: its asks are the ones it looks at
    tuning_parse.install()
    tuning_files.install()
    tuning_jinja.install()
    tuning_types.install()
    tuning_schemas.install()
    tuning_graph.install()


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
    """`Graph.get_subset_graph` made from the selection (`dbt_subset`), not a whole copy,
    after the selected tests' edges are added to a build's graph."""
    try:
        from dbt.graph.graph import Graph
    except ImportError:
        return

    def make(_dbt_s: Any) -> Any:
        def get_subset_graph(self: Any, selected: Any) -> Any:
            selected = set(selected)
            manifest = getattr(self.graph, PENDING_TEST_EDGES, None)
            if manifest is not None:
                edges = selected_test_edges(self.graph, manifest, selected)
                self.graph.add_edges_from(edges, edge_type="parent_test")
            return Graph(subset_graph(self.graph, selected))

        return get_subset_graph

    _replace_once(Graph, "get_subset_graph", make)


def _flat_graph_on_first_read() -> None:
    """`Manifest.build_flat_graph` leaves a `LazyFlatGraph` (see `dbt_flat_graph`)."""
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


def _test_edges_of_the_selection() -> None:
    """`Linker.add_test_edges_1` leaves the test edges to the run's selection: it marks the
    graph (`PENDING_TEST_EDGES`), and `get_subset_graph` (`_subset_from_selection`) adds the
    edges of the selected tests before cutting the graph down."""
    try:
        from dbt.compilation import Linker
    except ImportError:
        return

    def add_test_edges_1(self: Any, manifest: Any) -> None:
        setattr(self.graph, PENDING_TEST_EDGES, manifest)

    _replace_once(Linker, "add_test_edges_1", lambda _dbt_s: add_test_edges_1)


def _debug_events_only_when_taken() -> None:
    """`EventManager.fire_event` returns at once for a debug event nothing would take, and
    the relation cache adds a relation without building the debug event that says so."""
    taken = tuning_events.debug_taken()
    try:
        from dbt.adapters.cache import RelationsCache, _CachedRelation
        from dbt_common.events.base_types import EventLevel
        from dbt_common.events.event_manager import EventManager
        from dbt_common.events.event_manager_client import get_event_manager
    except ImportError:
        return
    if taken is None:
        return

    def make(fire_event: Any) -> Any:
        def fire_event_taken(
            self: Any,
            e: Any,
            level: Any = None,
            node: Any = None,
            force_warn_or_error_handling: bool = False,
        ) -> None:
            if (
                not force_warn_or_error_handling
                and (level or e.level_tag()) == EventLevel.DEBUG
                and not taken(self)
            ):
                return
            fire_event(self, e, level, node, force_warn_or_error_handling)

        return fire_event_taken

    _replace_once(EventManager, "fire_event", make)

    def make_add(add: Any) -> Any:
        def add_quietly(self: Any, relation: Any) -> Any:
            # dbt's own add, less its `CacheAction` debug event (built before it is fired)
            if self.log_cache_events or taken(get_event_manager()):
                return add(self, relation)
            cached = _CachedRelation(relation)
            with self.lock:
                self._setdefault(cached)
            return None

        return add_quietly

    _replace_once(RelationsCache, "add", make_add)


def _cache_schemas_once_per_schema() -> None:
    """`BaseAdapter._get_cache_schemas` makes one relation per distinct schema key."""
    try:
        from dbt.adapters.base.impl import BaseAdapter
    except ImportError:
        return
    known = tuning_parse.known_create_from()

    def make(get_cache_schemas: Any) -> Any:
        def get_cache_schemas_by_key(self: Any, relation_configs: Any) -> Any:
            if getattr(self.Relation.create_from, "__func__", None) not in known:
                return get_cache_schemas(self, relation_configs)
            schemas = set()
            seen: set[tuple[Any, ...]] = set()
            for config in relation_configs:
                key = _schema_key(config)
                if key is None or key not in seen:
                    relation = self.Relation.create_from(
                        quoting=self.config, relation_config=config
                    )
                    schemas.add(relation.without_identifier())
                if key is not None:
                    seen.add(key)
            return schemas

        return get_cache_schemas_by_key

    _replace_once(BaseAdapter, "_get_cache_schemas", make)


def _schema_key(config: Any) -> tuple[Any, ...] | None:
    """What `create_from(...).without_identifier()` reads of a node, for the base class's and
    dbt-duckdb's `create_from`; None for a source (dbt-duckdb reads its external location and
    plugin) or anything unhashable."""
    if config.resource_type == "source":
        return None
    catalog = (
        config.catalog_name if hasattr(config, "catalog_name") else config.config.get("catalog")
    )
    quoting = tuple(sorted(config.quoting_dict.items()))
    key = (config.database, config.schema, catalog, quoting, str(config.resource_type))
    try:
        hash(key)
    except TypeError:
        return None
    return key

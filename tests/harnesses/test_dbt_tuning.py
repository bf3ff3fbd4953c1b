"""What the warm worker changes in dbt's code answers as dbt does (real dbt classes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.harnesses.dbt import tuning as dbt_tuning

pytestmark = pytest.mark.slow  # imports dbt


@pytest.fixture
def linker_cls() -> Iterator[type]:
    from dbt.compilation import Linker

    original = Linker.find_cycles
    dbt_tuning._acyclic_first()
    yield Linker
    Linker.find_cycles = original  # type: ignore[method-assign]


def test_a_cycle_is_still_found_and_named(linker_cls: type) -> None:
    linker = linker_cls()
    linker.dependency("model.p.b", "model.p.a")
    linker.dependency("model.p.c", "model.p.b")
    assert linker.find_cycles() is None
    linker.dependency("model.p.a", "model.p.c")  # a -> b -> c -> a
    cycle = linker.find_cycles()
    assert cycle is not None
    assert set(cycle.split(" --> ")) == {"model.p.a", "model.p.b", "model.p.c"}
    assert linker_cls.find_cycles._patchit  # the patched one answered


def test_a_behaviour_flag_names_the_same_source_as_dbt_s() -> None:
    from dbt_common.behavior_flags import Behavior, BehaviorFlagRendered

    flags = [{"name": "my_flag", "default": False, "description": "d"}]
    original = BehaviorFlagRendered.__dict__["_default_source"]
    before = Behavior(flags, {}).my_flag._behavior_change_event.flag_source  # type: ignore[arg-type]
    dbt_tuning._flag_source_from_frames()
    try:
        assert getattr(BehaviorFlagRendered._default_source, "_patchit", False)
        after = Behavior(flags, {}).my_flag._behavior_change_event.flag_source  # type: ignore[arg-type]
    finally:
        BehaviorFlagRendered._default_source = original  # type: ignore[method-assign]
    assert before == after == __name__


def test_dbt_s_plugin_modules_are_found_once_and_are_dbt_s() -> None:
    from dbt.plugins.manager import PluginManager

    original = PluginManager.__dict__["get_prefixed_modules"]
    expected = PluginManager.get_prefixed_modules()
    dbt_tuning._plugins_found_once()
    try:
        first = PluginManager.get_prefixed_modules()
        assert first == expected and "dbt_common" in first
        first.clear()  # a caller's copy: the next caller still gets them all
        assert PluginManager.get_prefixed_modules() == expected
    finally:
        PluginManager.get_prefixed_modules = original  # type: ignore[method-assign]


def _random_dag(seed: int, n: int = 60) -> Any:
    import random

    import networkx

    rng = random.Random(seed)
    graph = networkx.DiGraph(name="g")
    names = [f"model.p.m{i:02d}" if rng.random() < 0.7 else f"test.p.t{i:02d}" for i in range(n)]
    for name in names:
        graph.add_node(name, kind=name.split(".")[0])
    for j, child in enumerate(names):
        for parent in rng.sample(names[:j], min(j, rng.randrange(4))):
            if rng.random() < 0.3:
                graph.add_edge(parent, child, edge_type="parent_test")
            else:
                graph.add_edge(parent, child)
    return graph


@pytest.mark.parametrize("seed", range(12))
def test_a_subset_graph_is_dbt_s(seed: int) -> None:
    import random

    from dbt.graph.graph import Graph

    from patchit.harnesses.dbt.subset import subset_graph

    graph = _random_dag(seed)
    rng = random.Random(seed)
    for size in (1, 5, 20, 59):
        selected = set(rng.sample(list(graph), size))
        theirs = Graph.get_subset_graph.__dict__.get("dbt_original", Graph.get_subset_graph)
        expected = theirs(Graph(graph.copy()), selected).graph
        got = subset_graph(graph, selected)
        assert list(got.nodes(data=True)) == list(expected.nodes(data=True))
        assert sorted(got.edges(data=True)) == sorted(expected.edges(data=True))
        assert got.graph == expected.graph
    with pytest.raises(ValueError, match=r"Couldn't find model 'model\.p\.nope'"):
        subset_graph(graph, {"model.p.nope"})


def test_a_debug_event_is_built_only_when_a_logger_or_callback_takes_it() -> None:
    import io

    from dbt.adapters.events.types import CacheAction
    from dbt.tracking import track_behavior_change_warn
    from dbt_common.events.base_types import EventLevel
    from dbt_common.events.event_manager import EventManager
    from dbt_common.events.logger import LoggerConfig

    built: list[str] = []
    event_cls = type("CountedCacheAction", (CacheAction,), {})

    def message(self: Any) -> str:
        built.append(self.action)
        return CacheAction.message(self)

    event_cls.message = message  # type: ignore[attr-defined]
    event_cls.__name__ = "CacheAction"  # its protobuf message is CacheAction's

    def fire(manager: EventManager, level: EventLevel | None = None) -> None:
        manager.fire_event(event_cls(action="add_relation", ref_key={}), level=level)

    def manager_with(*levels: EventLevel) -> tuple[EventManager, io.StringIO]:
        manager, out = EventManager(), io.StringIO()
        manager.add_callback(track_behavior_change_warn)
        for number, level in enumerate(levels):
            manager.add_logger(LoggerConfig(name=f"t{number}", level=level, output_stream=out))
        return manager, out

    original = EventManager.__dict__["fire_event"]
    dbt_tuning._debug_events_only_when_taken()
    try:
        info, out = manager_with(EventLevel.INFO, EventLevel.WARN)
        fire(info)
        assert built == [] and out.getvalue() == ""  # nothing takes it: not built
        fire(info, EventLevel.INFO)  # fired at info: built and written
        assert built == ["add_relation"] and "adding relation" in out.getvalue()
        debug, out = manager_with(EventLevel.INFO, EventLevel.DEBUG)  # `--debug`, a debug file
        fire(debug)
        assert len(built) == 2 and "adding relation" in out.getvalue()
        taken: list[str] = []
        info.add_callback(lambda msg: taken.append(msg.info.name))  # a caller's callback
        fire(info)
        assert len(built) == 3 and taken == ["CacheAction"]
    finally:
        EventManager.fire_event = original  # type: ignore[method-assign]


def test_the_relation_cache_adds_as_dbt_does_and_says_so_when_asked() -> None:
    from dbt.adapters.base.relation import BaseRelation
    from dbt.adapters.cache import RelationsCache
    from dbt_common.events.base_types import EventLevel
    from dbt_common.events.event_manager import EventManager
    from dbt_common.events.event_manager_client import get_event_manager
    from dbt_common.events.logger import LoggerConfig

    def relations() -> list[Any]:
        return [
            BaseRelation.create(database="d", schema=schema, identifier=f"m{i}", type="table")
            for schema in ("Main", "other")
            for i in range(3)
        ]

    def filled() -> RelationsCache:
        cache = RelationsCache()
        for relation in relations():
            cache.add(relation)
        cache.add(relations()[0])  # again: kept once
        return cache

    dbt_s = filled()
    manager = get_event_manager()
    saved = (list(manager.loggers), list(manager.callbacks))
    originals = (EventManager.__dict__["fire_event"], RelationsCache.__dict__["add"])
    seen: list[str] = []
    dbt_tuning._debug_events_only_when_taken()
    try:
        assert getattr(RelationsCache.add, "_patchit", False)
        manager.loggers, manager.callbacks = [], []
        manager.add_logger(LoggerConfig(name="info", level=EventLevel.INFO))
        quiet = filled()
        manager.add_callback(lambda msg: seen.append(msg.info.name))  # someone listens
        told = filled()
    finally:
        EventManager.fire_event, RelationsCache.add = originals  # type: ignore[method-assign]
        manager.loggers, manager.callbacks = saved
    for cache in (quiet, told):
        assert cache.dump_graph() == dbt_s.dump_graph()
        assert cache.schemas == dbt_s.schemas == {("d", "main"), ("d", "other")}
        assert cache.get_relations("d", "MAIN") == dbt_s.get_relations("d", "main")
    assert seen.count("CacheAction") == 7  # only while someone listened


_CACHE_SCHEMAS = """
import json, sys
from types import SimpleNamespace
from dbt.adapters.base.impl import BaseAdapter
from dbt.adapters.duckdb.relation import DuckDBRelation
from dbt.cli.main import dbtRunner
from patchit.harnesses.dbt import tuning as dbt_tuning
manifest = dbtRunner().invoke(sys.argv[1:]).result
nodes = [*manifest.nodes.values(), *manifest.sources.values()]
adapter = SimpleNamespace(Relation=DuckDBRelation, config=SimpleNamespace(quoting={}))
def schemas():
    return sorted(str(r) for r in BaseAdapter._get_cache_schemas(adapter, nodes))
before = schemas()
dbt_tuning._cache_schemas_once_per_schema()
assert getattr(BaseAdapter._get_cache_schemas, "_patchit", False)
print(json.dumps([before, schemas()]))
"""


def test_the_schemas_to_cache_are_dbt_s(tmp_path: Path) -> None:
    """Nodes in several schemas and databases, aliased, quoted, and sources: the schemas the
    cache lists are the ones dbt's `_get_cache_schemas` finds."""
    files = {
        "a.sql": "select 1 as id",
        "b.sql": "{{ config(alias='bee') }} select * from {{ ref('a') }}",
        "c.sql": "{{ config(database='other', schema='Side') }} select 1 as id",
        "d.sql": "{{ config(materialized='view') }} select * from {{ source('raw', 't') }}",
        "e.sql": "{{ config(materialized='ephemeral') }} select 1 as id",
        "marts/f.sql": "select * from {{ ref('b') }}",
        "marts/g.sql": "select * from {{ ref('f') }}",
        "src.yml": "version: 2\nsources:\n  - name: raw\n    schema: Raw\n"
        "    quoting: {identifier: true}\n    tables: [{name: t}]\n",
    }
    project = "models:\n  p:\n    +materialized: table\n    marts:\n      +schema: marts\n"
    models = {f"models/{name}": text + "\n" for name, text in files.items()}
    dbt_s, ours = on_parsed_project(tmp_path, _CACHE_SCHEMAS, models, project)
    assert ours == dbt_s
    assert len(dbt_s) >= 4  # main, main_marts, other.Side, Raw


_EVENTS = """
import io, json
from dbt_common.events.base_types import EventLevel
from dbt_common.events.event_manager_client import get_event_manager
from dbt_common.events.logger import LoggerConfig
from dbt.adapters.events.types import SQLQuery
from dbt.events.types import LogStartLine
from patchit.harnesses.dbt import tuning_events
manager = get_event_manager()
manager.loggers, manager.callbacks = [], []
out = io.StringIO()
manager.add_logger(LoggerConfig(name="info", level=EventLevel.INFO, output_stream=out))
def made():
    return SQLQuery(conn_name="c", sql="select 1", node_info={"node_name": "orders"})
dbt_s = made().to_dict()
tuning_events.build_debug_events_when_read()
quiet = made()
found = [
    "pb_msg" not in quiet.__dict__,  # a debug event nothing takes: not built
    quiet.sql,  # read: built as dbt builds it
    quiet.to_dict() == dbt_s,
]
written = made()
written.sql = "select 2"  # set: built first, then set
found.append(written.to_dict()["sql"])
info = LogStartLine(description="x", index=1, total=2, node_info={})
found.append("pb_msg" in info.__dict__)  # an info event: built at once
manager.add_logger(LoggerConfig(name="debug", level=EventLevel.DEBUG, output_stream=out))
found.append("pb_msg" in made().__dict__)  # `--debug`, a debug log file: built at once
print(json.dumps(found))
"""


def test_a_debug_event_nothing_takes_is_built_when_read() -> None:
    """`tuning_events`: the same message as dbt's, built when read or set; at once for an
    event above debug level, or while a debug logger listens."""
    done = subprocess.run([sys.executable, "-c", _EVENTS], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == [True, "select 1", True, "select 2", True, True]


_GENERATORS = """
import json
from dbt.clients.jinja import MacroGenerator
from patchit.harnesses.dbt import tuning_jinja
parts = (object(), {"ctx": 1}, object(), object())
dbt_s = MacroGenerator(*parts).__dict__
tuning_jinja.install()
ours = MacroGenerator(*parts).__dict__
class Other(MacroGenerator):  # a generator dbt made otherwise: not this one's to replace
    def __init__(self, macro, context=None, node=None, stack=None):
        super().__init__(macro, context, node, stack)
        self.extra = 1
print(json.dumps([
    MacroGenerator.__init__ is tuning_jinja._init,
    list(ours) == list(dbt_s) and all(ours[k] is dbt_s[k] for k in dbt_s),
    tuning_jinja._same_as_dbt_s(Other),
]))
"""


def test_a_macro_generator_is_made_as_dbt_makes_it() -> None:
    """`tuning_jinja`: one `__init__` that leaves a generator as dbt's three do; a class made
    otherwise fails the probe and keeps its own."""
    done = subprocess.run([sys.executable, "-c", _GENERATORS], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True, False]


# a small project's models for `on_parsed_project`: a and its children b and c, and c's d
DIAMOND = {
    "models/a.sql": "select 1 as id\n",
    "models/b.sql": "select * from {{ ref('a') }}\n",
    "models/c.sql": "select * from {{ ref('a') }}\n",
    "models/d.sql": "select * from {{ ref('c') }}\n",
}


def on_parsed_project(tmp_path: Path, script: str, files: dict[str, str], project: str = "") -> Any:
    """What `script` prints last (JSON), run in a fresh Python with dbt's `parse` arguments for
    a DuckDB project `p` in `tmp_path` holding `files` (path -> text); `project`: more of its
    `dbt_project.yml`."""
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: p\nconfig-version: 2\n" + project)
    (tmp_path / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: p.duckdb\n"
    )
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    args = ["parse", "--project-dir", str(tmp_path), "--profiles-dir", str(tmp_path)]
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_NAMESPACES = """
import json, sys
from dbt.cli.main import dbtRunner
from dbt.context import macros as dbt_macros
from dbt.context.manifest import ManifestContext
from dbt.exceptions import DuplicateMacroNameError
from patchit.harnesses.dbt import tuning_jinja
manifest = dbtRunner().invoke(sys.argv[1:]).result
by_package = manifest.get_macros_by_package()
Builder = dbt_macros.MacroNamespaceBuilder
dbt_s = Builder.build_namespace
tuning_jinja.install()
ours = Builder.build_namespace
def parts(build, search):
    builder = Builder("p", search, object(), ["dbt_duckdb", "dbt"], None)
    ctx = {}
    space = build(builder, by_package, ctx)
    dicts = [builder.globals, builder.locals, *builder.internal_packages.values(),
             *builder.packages.values(), space.global_project_namespace, dict(space)]
    return [[(k, v.macro.unique_id if hasattr(v, "macro") else sorted(v)) for k, v in d.items()]
            for d in dicts], space
found = []
for search in ("p", "dbt", "dbt_duckdb", "elsewhere"):
    (theirs, _), (mine, space) = parts(dbt_s, search), parts(ours, search)
    flat = tuning_jinja.flat_namespace(space)
    found.append([theirs == mine, list(flat.items()) == list(dict(space).items()), len(flat)])
twice = {"p": by_package["p"], "again": by_package["p"]}  # the same macros filed twice
errors = []
for build in (dbt_s, ours):
    try:
        build(Builder("p", "p", object(), ["dbt_duckdb", "dbt"], None), twice, {})
    except DuplicateMacroNameError as exc:
        errors.append(str(exc))
replaced = [getattr(f, "_patchit", False) for f in (ours, ManifestContext.to_dict)]
print(json.dumps([found, len(errors) == 2 and errors[0] == errors[1], replaced]))
"""


def test_a_context_s_macros_are_filed_and_merged_as_dbt_does(tmp_path: Path) -> None:
    """`tuning_jinja`: on a parsed project's real macros (its own overriding dbt's, dbt's and
    the adapter's), the namespaces are dbt's for a node of the project, of dbt, of the
    adapter and of another package; a context's merged names and order are `dict()` of the
    namespace; a macro filed twice raises dbt's own error."""
    files = {
        "macros/m.sql": "{% macro generate_schema_name(custom, node) %}{{ target.schema }}"
        "{% endmacro %}\n{% macro mine() %}1{% endmacro %}\n",
        "models/a.sql": "select {{ mine() }} as id\n",
    }
    found, same_error, replaced = on_parsed_project(tmp_path, _NAMESPACES, files)
    assert [row[:2] for row in found] == [[True, True]] * 4
    assert all(row[2] > 400 for row in found)  # dbt's and the adapter's macros, not a handful
    assert same_error is True
    assert replaced == [True, True]


_TYPES = """
import datetime, json
import agate, parsedatetime
from dbt_common.clients.agate_helper import table_from_rows
from patchit.harnesses.dbt import tuning_types
rows = [("2026-01-02", "2026-01-02 10:30:00", "1", "x"), ("2026-02-03", None, "2.5", "y")]
def table():
    t = table_from_rows(rows, ["d", "ts", "n", "s"])
    return [type(c).__name__ for c in t.column_types], [list(map(str, r)) for r in t.rows]
theirs = table()
tuning_types.install()
first, copy = parsedatetime.Constants(), parsedatetime.Constants()
copy._leapYears.append(2200)
print(json.dumps([
    theirs == table(), getattr(parsedatetime.Constants.__init__, "_patchit", False),
    2200 in first._leapYears, copy.fallbackLocales is first.fallbackLocales,
    copy.re_values is first.re_values,
]))
"""


def test_a_result_table_s_types_are_inferred_as_before_with_copied_date_constants() -> None:
    """`tuning_types`: a result table's inferred types and values are the same; a second
    `Constants` shares the first's tables but not the lists it changes."""
    done = subprocess.run([sys.executable, "-c", _TYPES], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, True, False, False, True]

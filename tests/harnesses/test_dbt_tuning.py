"""What the warm worker changes in dbt's code answers as dbt does (real dbt classes)."""

from __future__ import annotations

from collections.abc import Iterator
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

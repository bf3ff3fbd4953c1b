"""dbt's `graph` with each node serialised on first read (`patchit.harnesses.dbt.flat_graph`):
the same dict as dbt's, each node's `to_dict` made once, and none made until read."""

from __future__ import annotations

import copy
import json
import pickle
import threading
from typing import Any

from patchit.harnesses.dbt.flat_graph import SECTIONS, LazySection, lazy_build_flat_graph


class _Node:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    def to_dict(self, omit_none: bool) -> dict[str, Any]:
        assert omit_none is False  # as dbt's build_flat_graph asks
        self.calls.append(self.name)
        return {"name": self.name, "resource_type": "model"}


class _Manifest:
    """Stands in for dbt's Manifest: the sections dbt's `build_flat_graph` serialises."""

    def __init__(self, calls: list[str]) -> None:
        for name in SECTIONS:
            setattr(self, name, {})
        self.nodes = {f"model.p.{n}": _Node(n, calls) for n in ("a", "b", "c")}
        self.flat_graph: dict[str, Any] = {}


def _eager(manifest: _Manifest) -> dict[str, Any]:
    """What dbt's own `build_flat_graph` assigns."""
    return {
        name: {k: v.to_dict(omit_none=False) for k, v in getattr(manifest, name).items()}
        for name in SECTIONS
    }


def _lazy() -> tuple[list[str], dict[str, Any]]:
    calls: list[str] = []
    manifest = _Manifest(calls)
    lazy_build_flat_graph(lambda _m: None)(manifest)
    return calls, manifest.flat_graph


def test_no_node_is_serialised_until_read_and_each_once() -> None:
    calls, graph = _lazy()
    nodes = graph["nodes"]
    assert isinstance(nodes, LazySection) and calls == []
    assert len(nodes) == 3 and "model.p.b" in nodes and sorted(nodes) == sorted(nodes.keys())
    assert calls == []  # keys, membership and length serialise nothing
    assert nodes["model.p.b"]["name"] == "b" and nodes.get("model.p.b")["name"] == "b"
    assert nodes.get("model.p.zzz", "none") == "none"
    assert calls == ["b"]
    assert [n["name"] for n in nodes.values()] == ["a", "b", "c"]
    assert calls == ["b", "a", "c"] and nodes.unread == 0


def test_every_kind_of_read_sees_dbt_s_dict() -> None:
    eager = _eager(_Manifest([]))
    reads = [
        lambda g: g == eager,
        lambda g: json.loads(json.dumps(g)) == eager,  # the C encoder
        lambda g: json.loads(json.dumps(g, indent=1)) == eager,  # the Python one
        lambda g: pickle.loads(pickle.dumps(g)) == eager,
        lambda g: copy.deepcopy(g) == eager and copy.copy(g["nodes"]) == eager["nodes"],
        lambda g: dict(g["nodes"]) == eager["nodes"] and {**g["nodes"]} == eager["nodes"],
        lambda g: (g["nodes"] | {}) == eager["nodes"] and ({} | g["nodes"]) == eager["nodes"],
        lambda g: dict(g["nodes"].items()) == eager["nodes"],
        lambda g: "'name': 'a'" in repr(g),
        lambda g: g["nodes"].pop("model.p.a") == eager["nodes"]["model.p.a"],
        lambda g: g["nodes"].popitem() == ("model.p.c", eager["nodes"]["model.p.c"]),
        lambda g: g["nodes"].setdefault("model.p.a") == eager["nodes"]["model.p.a"],
    ]
    for read in reads:
        _, graph = _lazy()
        assert read(graph), read


def test_writes_replace_what_would_have_been_serialised() -> None:
    calls, graph = _lazy()
    nodes = graph["nodes"]
    nodes["model.p.a"] = {"name": "replaced"}
    nodes.update({"model.p.d": {"name": "d"}})
    del nodes["model.p.b"]
    assert nodes == {"model.p.a": {"name": "replaced"}, "model.p.c": eager_c(),
                     "model.p.d": {"name": "d"}}  # fmt: skip
    assert calls == ["c"]


def eager_c() -> dict[str, Any]:
    return {"name": "c", "resource_type": "model"}


def test_threads_reading_at_once_serialise_a_node_once() -> None:
    calls, graph = _lazy()
    barrier = threading.Barrier(8)
    seen: list[str] = []

    def read() -> None:
        barrier.wait()
        seen.append(graph["nodes"]["model.p.a"]["name"])

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["a"] * 8 and calls == ["a"]

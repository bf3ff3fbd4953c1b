"""patchit's imports go one way: no module and no package takes part in an import cycle.

Every import counts, at module level, inside a function, or under `if TYPE_CHECKING:`, because
each one is a dependency a reader has to hold in their head. A package is the first component
under `patchit` (`patchit.memory`); a top-level module (`patchit/config.py`) is its own node.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "patchit"

Graph = dict[str, set[str]]


def module_names(root: Path) -> dict[str, Path]:
    """Each module under `root`, by dotted name (`patchit.memory` for its `__init__.py`)."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_package(name: str, modules: Mapping[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest known module that `name` (a module or a name inside one) lives in."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(name: str, modules: Mapping[str, Path]) -> set[str]:
    """The patchit modules that module `name` imports, anywhere in its source."""
    tree = ast.parse(modules[name].read_text(), filename=str(modules[name]))
    # the package a relative import starts from
    here = name if _is_package(name, modules) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            # `from pkg import module` imports the module; `from module import name` the module
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            if not target.startswith("patchit"):
                continue
            module = _known(target, modules)
            if module is not None and module != name:
                found.add(module)
    return found


def module_graph(root: Path = PACKAGE_ROOT) -> Graph:
    modules = module_names(root)
    return {name: imports_of(name, modules) for name in modules}


def package_of(module: str) -> str:
    """`patchit.memory.store` -> `patchit.memory`; `patchit.config` -> `patchit.config`."""
    return ".".join(module.split(".")[:2])


def package_graph(modules: Mapping[str, Iterable[str]]) -> Graph:
    graph: Graph = {}
    for name, targets in modules.items():
        edges = graph.setdefault(package_of(name), set())
        edges.update(package_of(t) for t in targets if package_of(t) != package_of(name))
    return graph


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The groups of nodes that reach each other (Tarjan), each of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def one_cycle(graph: Mapping[str, Iterable[str]], group: list[str]) -> list[str]:
    """A shortest path from the group's first node back to itself, inside the group."""
    start = group[0]
    members = set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in members:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{group} is not a cycle")


def describe(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """One line per cycle group: a shortest cycle, then every import inside the group."""
    lines = []
    for group in strongly_connected(graph):
        inside = [f"{a} -> {b}" for a in group for b in sorted(graph[a]) if b in group]
        lines.append(f"{' -> '.join(one_cycle(graph, group))}  (imports: {'; '.join(inside)})")
    return lines


def test_the_resolver_sees_every_kind_of_import(tmp_path: Path) -> None:
    root = tmp_path / "patchit"
    files = {
        "__init__.py": "",
        "events/__init__.py": "",
        "events/model.py": "",
        "memory/__init__.py": "from .store import Memory\n",
        "memory/store.py": "class Memory: ...\n",
        "memory/records.py": "",
        "stage/__init__.py": "",
        "stage/a.py": (
            "from typing import TYPE_CHECKING\n"
            "import os\n"
            "from patchit.events import model\n"  # `from pkg import module`
            "from patchit.memory import Memory\n"  # a name in a package's __init__
            "from . import b\n"  # relative, from the package
            "if TYPE_CHECKING:\n"
            "    from ..memory.records import Thing\n"
            "def f() -> None:\n"
            "    import patchit.top\n"
        ),
        "stage/b.py": "",
        "top.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    modules = module_names(root)
    assert imports_of("patchit.stage.a", modules) == {
        "patchit.events.model",
        "patchit.memory",
        "patchit.stage.b",
        "patchit.memory.records",
        "patchit.top",
    }
    assert imports_of("patchit.memory", modules) == {"patchit.memory.store"}
    packages = package_graph(module_graph(root))
    assert packages["patchit.stage"] == {"patchit.events", "patchit.memory", "patchit.top"}
    assert packages["patchit.memory"] == set()


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert describe(graph) == ["a -> b -> c -> a  (imports: a -> b; b -> c; c -> a)"]
    assert describe({"a": {"b"}, "b": set()}) == []


def test_no_module_is_in_an_import_cycle() -> None:
    cycles = describe(module_graph())
    assert not cycles, "module import cycles:\n" + "\n".join(cycles)


def test_no_package_is_in_an_import_cycle() -> None:
    cycles = describe(package_graph(module_graph()))
    assert not cycles, "package import cycles:\n" + "\n".join(cycles)

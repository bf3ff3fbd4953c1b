"""What the warm dbt worker changes in dbt's own code, once, before it serves any run.

None of it changes what a run builds or how it is judged:

- dbt's writers of artifacts nothing reads in a sandbox run are skipped: the whole manifest,
  serialised twice a run (after parsing, and after running), the pickled graph with every
  node serialised again, and a diagnostic summary of the graph; on a 200-model project that
  was a third of a warm run. The worker writes the run's own nodes instead
  (`dbt_worker._write_run_nodes`).
- The graph's cycle check asks networkx whether the graph is acyclic first (a topological
  sort), and only walks it for the cycle's path when it is not: the same answer, for a
  fraction of the walk.
- Each run records whether dbt parsed partially (`parse_mode`): warm runs do not write
  dbt's debug log, where the harness used to look for it.
- The failing run's saved parse is decoded once per worker (`dbt_saved_parse`).
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

from patchit.harnesses import dbt_saved_parse

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
    _recording_parse_mode()
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


def _acyclic_first() -> None:
    """`Linker.find_cycles` returns None at once for an acyclic graph."""
    try:
        import networkx
        from dbt.compilation import Linker
    except ImportError:
        return
    find_cycles: Any = Linker.find_cycles
    if getattr(find_cycles, "_patchit", False):
        return

    def acyclic_first(self: Any) -> Any:
        if networkx.is_directed_acyclic_graph(self.graph):
            return None
        return find_cycles(self)

    acyclic_first._patchit = True  # type: ignore[attr-defined]
    Linker.find_cycles = acyclic_first  # type: ignore[method-assign]


def _recording_parse_mode() -> None:
    """After each `ManifestLoader.load`, `parse_mode` says whether it parsed partially."""
    try:
        from dbt.parser.manifest import ManifestLoader
    except ImportError:
        return
    load = ManifestLoader.load
    if getattr(load, "_patchit", False):
        return

    def recording_load(self: Any) -> Any:
        global _parse_mode
        manifest = load(self)
        partial = bool(getattr(self, "partially_parsing", False))
        _parse_mode = "partial" if partial or getattr(self, "skip_parsing", False) else "full"
        return manifest

    recording_load._patchit = True  # type: ignore[attr-defined]
    ManifestLoader.load = recording_load  # type: ignore[method-assign]

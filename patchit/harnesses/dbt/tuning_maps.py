"""What the warm dbt worker changes in when dbt builds a manifest's edge maps (see `tuning`
for the rest).

A parse asks for the manifest's `child_map` and `parent_map` (every node's children and
parents, ~17 ms each build on a 2,000-model project) four times; a run reads them after two
of those. `ManifestLoader.load` asks before it looks for external nodes and resolves refs,
and reads them only when the project has external nodes; its deprecation check asks again,
and reads them only for a model with a deprecation date; the compiler asks again and reads
them for the test edges. Here those first two asks mark the maps as due instead, and the
maps are built when next read, from the manifest as it then is: a read right after the ask
sees what dbt's eager build would have built (nothing changes the nodes in between, at
either place), and an ask nothing reads is dropped. Every other ask (the saved parse's, the
compiler's, writing the manifest) builds at once, as dbt does.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from patchit.harnesses.dbt.saved_parse import MAPS_AS_SAVED
from patchit.harnesses.dbt.tuning_base import replace_once

_DUE = "_patchit_edge_maps_due"  # on a manifest whose maps are built when next read
_MAPS = ("child_map", "parent_map")


def install() -> None:
    try:
        from dbt.contracts.graph.manifest import Manifest
        from dbt.parser.manifest import ManifestLoader
    except ImportError:
        return
    if any(name in vars(Manifest) for name in _MAPS):
        return  # a dbt with maps of its own kind (or installed already): left as it is
    asking = frozenset(
        _dbt_s(getattr(ManifestLoader, name)).__code__
        for name in ("load", "check_for_model_deprecations")
    )
    # over the saved parse's replacement (its first maps), whichever installs first
    replace_once(
        Manifest, "build_parent_and_child_maps", lambda build: _due(build, asking), layer="due"
    )
    for name in _MAPS:
        setattr(Manifest, name, _BuiltWhenRead(name))


def _dbt_s(function: Any) -> Any:
    """dbt's own function under patchit's replacements of it (`replace_once`)."""
    while hasattr(function, "dbt_original"):
        function = function.dbt_original
    return function


def _due(build: Any, asking: frozenset[Any]) -> Any:
    def build_parent_and_child_maps(self: Any) -> Any:
        if _caller(type(self).build_parent_and_child_maps) in asking:
            self.__dict__[_DUE] = build
            # a later build is a new one, not the one kept when the parse was decoded
            self.__dict__.pop(MAPS_AS_SAVED, None)
            return None
        self.__dict__.pop(_DUE, None)
        return build(self)

    return build_parent_and_child_maps


def _caller(top: Any) -> Any:
    """The code of the function that called dbt's `build_parent_and_child_maps`, past
    patchit's replacements of it (`top` and the ones it wraps, `replace_once`)."""
    ours = set()
    while getattr(top, "_patchit", False):
        ours.add(top.__code__)
        top = top.dbt_original
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code in ours:
        frame = frame.f_back
    return frame.f_code if frame is not None else None


class _BuiltWhenRead:
    """A manifest's `child_map` or `parent_map` (plain attributes in dbt): read from the
    instance, built first when an ask marked them due."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, manifest: Any, owner: Any = None) -> Any:
        if manifest is None:
            return self
        held = manifest.__dict__
        build = held.pop(_DUE, None)
        if build is not None:
            build(manifest)
        try:
            return held[self.name]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, manifest: Any, value: Any) -> None:
        manifest.__dict__[self.name] = value

    def __delete__(self, manifest: Any) -> None:
        manifest.__dict__.pop(_DUE, None)
        try:
            del manifest.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None

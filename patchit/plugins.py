"""Loading plugins from entry points, the one way for every kind (strategies, harnesses).

Built-ins are registered in patchit's own pyproject.toml under the same groups a third party
uses, so they load exactly alike. A plugin that does not load, or does not satisfy its
Protocol, is skipped with a `PatchitWarning` naming it: one broken plugin must not stop the
others.
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points
from typing import TypeVar

from patchit.errors import PatchitWarning

T = TypeVar("T")


def load_plugins(group: str, protocol: type[T], needs: str) -> list[T]:
    """One instance of each entry point in `group` (classes are instantiated with no
    arguments), in entry-point name order; `needs` says what `protocol` asks for."""
    kind = protocol.__name__
    loaded: list[T] = []
    for point in sorted(entry_points(group=group), key=lambda p: (p.name, p.value)):
        try:
            target = point.load()
            plugin = target() if isinstance(target, type) else target
        except Exception as exc:  # a plugin's import error is its own bug, reported here
            warnings.warn(
                f"{kind} plugin {point.name!r} ({point.value}) failed to load: {exc!r}",
                PatchitWarning,
                stacklevel=3,
            )
            continue
        if not isinstance(plugin, protocol):
            warnings.warn(
                f"{kind} plugin {point.name!r} ({point.value}) is not a {kind} (needs {needs})",
                PatchitWarning,
                stacklevel=3,
            )
            continue
        loaded.append(plugin)
    return loaded

"""Finding strategies. Every one, tier 0's fix-its and the model alike, is registered under
the `patchit.strategies` entry point group in patchit's own pyproject.toml: the same hook a
third-party package uses, so a plugin is loaded exactly like a built-in. A third party adds
one with:

    [project.entry-points."patchit.strategies"]
    my_fix = "my_package.strategies:MyFixStrategy"
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points

from patchit.errors import PatchitWarning
from patchit.patching.base import Strategy

ENTRY_POINT_GROUP = "patchit.strategies"


def load_strategies() -> list[Strategy]:
    """Every strategy registered under `patchit.strategies`, sorted by tier, then name.

    An entry point that does not load or does not satisfy `Strategy` is skipped with a
    `PatchitWarning` naming it: one broken plugin must not stop patchit healing.
    """
    loaded: dict[str, Strategy] = {}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.name, p.value)):
        try:
            target = point.load()
            strategy = target() if isinstance(target, type) else target
        except Exception as exc:  # a plugin's import error is its own bug, reported below
            warnings.warn(
                f"strategy entry point {point.name} = {point.value} failed to load: {exc!r}",
                PatchitWarning,
                stacklevel=2,
            )
            continue
        if not isinstance(strategy, Strategy):
            warnings.warn(
                f"strategy entry point {point.name} = {point.value} is not a Strategy "
                "(needs name, tag, tier, propose(request) and close())",
                PatchitWarning,
                stacklevel=2,
            )
            continue
        loaded.setdefault(strategy.name, strategy)
    return sorted(loaded.values(), key=lambda s: (s.tier, s.name))

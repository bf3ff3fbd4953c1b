"""Finding strategies. Every one, tier 0's fix-its and the model alike, is registered under
the `patchit.strategies` entry point group in patchit's own pyproject.toml: the same hook a
third-party package uses, so a plugin is loaded exactly like a built-in. A third party adds
one with:

    [project.entry-points."patchit.strategies"]
    my_fix = "my_package.strategies:MyFixStrategy"
"""

from __future__ import annotations

from patchit.patching.base import Strategy
from patchit.plugins import load_plugins

ENTRY_POINT_GROUP = "patchit.strategies"
NEEDS = "name, tag, tier, rank, propose(request) and close()"


def load_strategies() -> list[Strategy]:
    """Every strategy registered under `patchit.strategies`, sorted by tier, rank, then name.

    An entry point that does not load or does not satisfy `Strategy` is skipped with a
    `PatchitWarning` naming it: one broken plugin must not stop patchit healing.
    """
    loaded: dict[str, Strategy] = {}
    for strategy in load_plugins(ENTRY_POINT_GROUP, Strategy, NEEDS):  # type: ignore[type-abstract]
        loaded.setdefault(strategy.name, strategy)
    return sorted(loaded.values(), key=lambda s: (s.tier, s.rank, s.name))

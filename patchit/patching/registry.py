"""Finding strategies and asking them for patches.

Built-in tier-0 fix-its are registered under the `patchit.strategies` entry point group in
patchit's own pyproject.toml: the same hook a third-party package uses, so a plugin is loaded
exactly like a built-in. A third party adds one with:

    [project.entry-points."patchit.strategies"]
    my_fix = "my_package.strategies:MyFixStrategy"
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from importlib.metadata import entry_points

from patchit.errors import PatchitWarning
from patchit.evidence.model import Evidence
from patchit.patching.base import PatchCandidate, PriorAttempt, Strategy

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
                "(needs name, tag, tier and propose(evidence, history))",
                PatchitWarning,
                stacklevel=2,
            )
            continue
        loaded.setdefault(strategy.name, strategy)
    return sorted(loaded.values(), key=lambda s: (s.tier, s.name))


def propose_patches(
    evidence: Evidence, history: list[PriorAttempt], strategies: Iterable[Strategy]
) -> Iterator[PatchCandidate]:
    """Candidates from each strategy in order, lazily, each distinct edit set once.

    Lazy so the loop stops asking (and a tier-1 strategy stops spending tokens) as soon as a
    candidate verifies. A strategy that raises is reported as a `PatchitWarning` and skipped.
    """
    seen: set[str] = set()
    for strategy in strategies:
        try:
            candidates = strategy.propose(evidence, history)
        except Exception as exc:  # one faulty strategy must not hide the others' candidates
            warnings.warn(
                f"strategy {strategy.name} failed on {evidence.event.short()}: {exc!r}",
                PatchitWarning,
                stacklevel=2,
            )
            continue
        for candidate in candidates:
            key = "\x00".join(e.model_dump_json() for e in candidate.edits)
            if key in seen:
                continue
            seen.add(key)
            yield candidate

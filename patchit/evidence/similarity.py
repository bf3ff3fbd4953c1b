"""Near-name matching: one clear winner above a bar, or no guess at all.

Pure text, below both its users: the tier-0 fix-its (patchit.patching.fixits) and the
classifier's "is this a misspelt module" check (patchit.classify.airflow_signatures).

The score is difflib's `SequenceMatcher.ratio()` (2*matches / total length, 0..1) on
normalised names: lower-cased, with `_`, `-`, spaces and surrounding quotes removed, because
dbt and SQL names differ in case and separators far more often than in letters
(`Order_Date` ~ `order_date`). The default bar, 0.75, accepts one or two slipped letters in
an ordinary name (`nme`->`name` 0.86, `amout`->`amount` 0.91, `stg_order`->`stg_orders`
0.94) and refuses unrelated names that merely share a suffix (`daily_revenue`->
`order_payments` 0.40, `stg_payments`->`raw_payments` 0.73).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

DEFAULT_MIN_RATIO = 0.75


def normalise_name(name: str) -> str:
    """The form names are compared in: case and separators do not count."""
    stripped = name.strip().strip("\"'`[]")
    return "".join(ch for ch in stripped.lower() if ch not in "_- ")


def name_ratio(a: str, b: str) -> float:
    """Similarity of two names in [0, 1] after normalisation."""
    return difflib.SequenceMatcher(None, normalise_name(a), normalise_name(b)).ratio()


def nearest(
    name: str, candidates: Iterable[str], min_ratio: float = DEFAULT_MIN_RATIO
) -> str | None:
    """The single candidate most similar to `name`, or None.

    None when no candidate reaches `min_ratio`, and None when two different candidates share
    the best score: a fix-it that has to pick between equals is guessing. A candidate equal
    to `name` itself is ignored (it cannot be the fix for a name that failed).
    """
    best: list[str] = []
    best_ratio = -1.0
    for candidate in sorted(set(candidates)):
        if candidate == name:
            continue
        ratio = name_ratio(name, candidate)
        if ratio > best_ratio:
            best, best_ratio = [candidate], ratio
        elif ratio == best_ratio:
            best.append(candidate)
    if best_ratio < min_ratio or len(best) != 1:
        return None
    return best[0]

"""Confidence in a verified fix, from signals a reader can check (each shown beside the number).

The score is the product of one factor per signal, so a weak signal lowers it visibly:
- diagnosis: a matched failure signature, or only a generic one;
- the fix's kind: a targeted fix-it, a partial revert of the breaking change, or the model;
- verification fidelity: the real runtime, a file-level check, or a stand-in;
- the data check: outputs compared with the last good run, or not compared; and what it
  could not judge (new columns or outputs, which have no baseline);
- passing candidates: one, or several different ones (the choice was less clear).
`[delivery] mode = "threshold"` opens a pull request only above `min_confidence`.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchit.fidelity.model import DataCheck

GENERIC_SIGNATURES = frozenset({"", "none", "unknown", "python_error_in_repo"})


@dataclass(frozen=True)
class Confidence:
    score: float
    signals: list[str]


def fix_confidence(
    *,
    signature: str,
    strategy: str,
    tier: int,
    fidelity: str,
    data_check: DataCheck | None,
    passing: int,
) -> Confidence:
    factors: list[tuple[str, float]] = []
    if signature in GENERIC_SIGNATURES:
        factors.append((f"diagnosis: generic signature `{signature or 'none'}`", 0.8))
    else:
        factors.append((f"diagnosis: matched signature `{signature}`", 1.0))
    if tier > 0:
        factors.append((f"fix: proposed by the model (`{strategy}`, tier {tier})", 0.7))
    elif strategy == "partial_revert":
        factors.append(("fix: partial revert of the breaking change", 0.85))
    elif strategy == "dbt_fanout_join":  # it chose the grain: the unique test's, not the join's
        factors.append(("fix: the change's join made once per key, its new columns lists: "
                        "check that one row per key is what was meant", 0.85))  # fmt: skip
    else:
        factors.append((f"fix: targeted fix-it `{strategy}`", 1.0))
    runtime = {"runtime": 1.0, "file": 0.8}.get(fidelity, 0.5)
    factors.append((f"verification fidelity: `{fidelity}`", runtime))
    if data_check is None or data_check.status in ("not_run", "error", "no_baseline"):
        why = data_check.status if data_check else "not run"
        factors.append((f"data check: {why.replace('_', ' ')}", 0.8))
    elif data_check.needs_review:
        factors.append(("data check: outputs differ where nothing meant them to", 0.3))
    else:
        factors.append((f"data check: {data_check.status}", 1.0))
    if data_check is not None and (unjudged := data_check.unjudged()):
        # a new column the fix feeds has no baseline: nothing checked what it holds
        factors.append((unjudged, 0.8))
    if passing > 1:
        factors.append((f"candidates: {passing} different ones passed", 0.9))
    else:
        factors.append(("candidates: one passed", 1.0))
    score = 1.0
    for _, factor in factors:
        score *= factor
    return Confidence(round(score, 2), [f"{text} (x{factor:.2f})" for text, factor in factors])

"""Confidence: one factor per checkable signal, each shown beside the number."""

from __future__ import annotations

from patchit.fidelity.model import DataCheck
from patchit.reports.confidence import fix_confidence


def _conf(**kw: object) -> tuple[float, list[str]]:
    args: dict[str, object] = {
        "signature": "duckdb_column_not_found", "strategy": "duckdb_rename_column", "tier": 0,
        "fidelity": "runtime", "data_check": DataCheck(status="same", kind="dbt"), "passing": 1,
    }  # fmt: skip
    args.update(kw)
    c = fix_confidence(**args)  # type: ignore[arg-type]
    return c.score, c.signals


def test_targeted_fix_with_clean_data_check_is_full_confidence() -> None:
    score, signals = _conf()
    assert score == 1.0
    assert len(signals) == 5 and signals[1] == "fix: targeted fix-it `duckdb_rename_column` (x1.00)"


def test_each_weak_signal_lowers_the_score_visibly() -> None:
    full, _ = _conf()
    for weak in (
        {"signature": "unknown"},
        {"strategy": "partial_revert"},
        {"strategy": "dbt_fanout_join"},
        {"strategy": "llm", "tier": 1},
        {"fidelity": "fake"},
        {"data_check": None},
        {"data_check": DataCheck(status="not_run")},
        {"passing": 3},
    ):
        score, signals = _conf(**weak)
        assert score < full, weak
        assert any("(x1.00)" not in s for s in signals)


def test_model_fix_without_data_check_is_below_a_default_threshold() -> None:
    score, _ = _conf(strategy="llm", tier=1, data_check=None, signature="unknown")
    assert score < 0.8

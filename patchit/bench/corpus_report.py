"""The corpus results: a summary of the judged scenarios, as JSON and as a Markdown table."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.bench.corpus_judge import ScenarioResult


@dataclass
class CorpusSummary:
    scenarios: int
    passed: int
    code_bugs: int
    code_bugs_fixed: int
    fix_rate: float
    escalations: int
    escalations_right: int
    escalation_accuracy: float
    traps: int
    traps_passed: int
    wrong_fixes: int
    intents_judged: int  # scenarios with `keeps` and a fixed branch
    intents_kept: int
    reverts: int  # scenarios whose fixed branch reverted an intent (counted as wrong fixes)
    user_tree_touches: int
    runner_errors: int
    median_time_s: float | None
    p90_time_s: float | None
    tokens_total: int
    tokens_per_fix: float | None
    tiers_used: list[int]
    generated_utc: str


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


def _p90(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered) + 0.5) - 1)], 2)


def summarise(results: list[ScenarioResult]) -> CorpusSummary:
    code = [r for r in results if r.expect == "fixed"]
    fixed = [r for r in code if r.passed]
    escalations = [r for r in results if r.expect == "escalated"]
    traps = [r for r in results if r.trap]
    times = [r.time_to_final_s for r in results if r.time_to_final_s is not None]
    tokens = sum(r.tokens for r in results)
    fixes = sum(1 for r in results if r.outcome == "fixed")
    return CorpusSummary(
        scenarios=len(results),
        passed=sum(r.passed for r in results),
        code_bugs=len(code),
        code_bugs_fixed=len(fixed),
        fix_rate=_ratio(len(fixed), len(code)),
        escalations=len(escalations),
        escalations_right=sum(r.passed for r in escalations),
        escalation_accuracy=_ratio(sum(r.passed for r in escalations), len(escalations)),
        traps=len(traps),
        traps_passed=sum(not r.wrong_fix and not r.error for r in traps),
        wrong_fixes=sum(r.wrong_fix for r in results),
        intents_judged=sum(r.intent_kept is not None for r in results),
        intents_kept=sum(r.intent_kept is True for r in results),
        reverts=sum(r.reverts for r in results),
        user_tree_touches=sum(not r.untouched and not r.error for r in results),
        runner_errors=sum(r.error is not None for r in results),
        median_time_s=round(statistics.median(times), 2) if times else None,
        p90_time_s=_p90(times),
        tokens_total=tokens,
        tokens_per_fix=round(tokens / fixes, 1) if fixes else None,
        tiers_used=sorted({t for r in results for t in r.tiers}),
        generated_utc=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def to_json(results: list[ScenarioResult], summary: CorpusSummary) -> dict[str, Any]:
    return {"summary": asdict(summary), "scenarios": [r.to_json() for r in results]}


def _fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def summary_lines(s: CorpusSummary) -> list[str]:
    return [
        f"scenarios: {s.scenarios}, passed {s.passed}",
        f"code-bug fix rate: {s.code_bugs_fixed}/{s.code_bugs} = {s.fix_rate:.0%}",
        f"escalation accuracy: {s.escalations_right}/{s.escalations} = {s.escalation_accuracy:.0%}",
        f"traps passed (no wrong branch): {s.traps_passed}/{s.traps}",
        f"wrong fixes: {s.wrong_fixes} (reverts of an intent: {s.reverts}); "
        f"user-tree touches: {s.user_tree_touches}; runner errors: {s.runner_errors}",
        f"intent kept: {s.intents_kept}/{s.intents_judged} fixed branches judged on `keeps`",
        f"time from failure to final state: median {_fmt_s(s.median_time_s)} s, "
        f"p90 {_fmt_s(s.p90_time_s)} s",
        f"tokens: {s.tokens_total} total, per fix "
        f"{'-' if s.tokens_per_fix is None else s.tokens_per_fix}; tiers used: "
        f"{', '.join(str(t) for t in s.tiers_used) or 'none'}",
    ]


def outcomes_in(path: Path) -> dict[str, str] | None:
    """Each scenario's outcome in an earlier results file (None: there is none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(s["name"]): str(s["outcome"]) for s in data["scenarios"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def markdown(
    results: list[ScenarioResult],
    summary: CorpusSummary,
    duckdb: dict[str, str] | None = None,
) -> str:
    """The summary and a row per scenario; with `duckdb` (a Postgres run), a column with
    each scenario's outcome on DuckDB (from latest.json) beside it."""
    beside = " duckdb |" if duckdb is not None else ""
    head = (
        f"| scenario | kind | expected |{beside} outcome | intent kept | reverts | class "
        "| attempts | tiers | tokens | time s | hidden check | untouched | pass |\n"
        f"|---|---|---|{'---|' if beside else ''}---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = []
    for r in results:
        expected = r.expect if r.expect == "fixed" else f"{r.expect} {r.expect_class}"
        if r.trap:
            expected += " (trap)"
        other = f" {duckdb.get(r.name, '-')} |" if duckdb is not None else ""
        rows.append(
            f"| {r.name} | {r.kind} | {expected} |{other} {r.outcome} | {_yes_no(r.intent_kept)} "
            f"| {'YES' if r.reverts else '-'} | {r.classification or '-'} "
            f"| {r.attempts} | {','.join(map(str, r.tiers)) or '-'} | {r.tokens} "
            f"| {_fmt_s(r.time_to_final_s)} | {r.hidden_check} "
            f"| {'yes' if r.untouched else 'NO'} | {'yes' if r.passed else 'no'} |"
        )
    failing = [f"- `{r.name}`: {r.reason}" for r in results if not r.passed]
    parts = [
        f"patchit bench: {summary.scenarios} scenarios ({summary.generated_utc})",
        "",
        *(f"- {line}" for line in summary_lines(summary)),
        "",
        head,
        *rows,
    ]
    if failing:
        parts += ["", "Scenarios that miss their expectation:", "", *failing]
    return "\n".join(parts) + "\n"


def write_results(
    results: list[ScenarioResult], summary: CorpusSummary, out_dir: Path, stem: str
) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    json_path.write_text(json.dumps(to_json(results, summary), indent=2) + "\n")
    md_path.write_text(markdown(results, summary))
    return json_path, md_path

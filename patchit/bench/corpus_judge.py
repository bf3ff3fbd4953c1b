"""Judge one scenario from what was observed outside patchit.

- `fixed` expected (a code bug): a `fixed` incident whose branch, run from scratch, gives
  the good commit's hidden-check values.
- `escalated` expected: an `escalated` incident with the expected classification.
- `refused` expected (a trap): no wrong branch; escalating, failing or a correct branch pass.
A wrong fix is a fixed branch whose hidden check differs from the good commit's (or that does
not run), or one that reverts an intent of the change: it lacks one of the scenario's `keeps`
(a revert restores the good values, so the hidden check alone cannot see it). `intent_kept`
says whether every fixed branch kept them (None: no keeps, or no fixed branch), `reverts`
whether one did not. A branch that rewrote the line ends of a scenario's CRLF files fails it
too. Every scenario must also leave the user's tree untouched: the same status (ignored files
included), HEAD, branch, no extra worktree and the same database/output content as a plain run
of the broken commit leaves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from patchit.bench.corpus_run import Observation, time_to_final_s

_STATUS_RANK = {"fixed": 0, "escalated": 1, "failed": 2, "open": 3}


@dataclass
class ScenarioResult:
    """One row of the benchmark table."""

    name: str
    kind: str
    mode: str
    trap: bool
    expect: str
    expect_class: str
    outcome: str
    classification: str | None
    attempts: int
    tiers: list[int]
    tokens: int
    time_to_final_s: float | None
    patchit_wall_s: float
    hidden_check: str
    wrong_fix: bool
    untouched: bool
    touched: list[str]
    passed: bool
    reason: str
    incidents: list[str] = field(default_factory=list)
    branch: str | None = None
    broken_fails: bool = True
    error: str | None = None
    intent_kept: bool | None = None
    reverts: bool = False
    keeps_missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _primary(incidents: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The incident that decides the outcome: a fixed one first, then escalated, failed."""
    if not incidents:
        return None
    return min(incidents, key=lambda i: _STATUS_RANK.get(str(i.get("status")), 9))


def _hidden_check(obs: Observation) -> tuple[str, bool]:
    """("match" | "differs" | "branch fails" | "n/a", wrong fix?) over every fixed branch."""
    if not obs.branches:
        return "n/a", False
    verdicts = []
    for branch in obs.branches:
        if not branch.run_ok or branch.value is None:
            verdicts.append("branch fails")
        elif branch.value == obs.good_value:
            verdicts.append("match")
        else:
            verdicts.append("differs")
    worst = next((v for v in ("differs", "branch fails") if v in verdicts), "match")
    return worst, worst != "match"


def _intent(obs: Observation) -> tuple[bool | None, list[str]]:
    """(every fixed branch kept the change's intents?, the keeps some branch missed)."""
    if not obs.scenario.keeps or not obs.branches:
        return None, []
    missing = sorted({m for branch in obs.branches for m in branch.keeps_missing})
    return not missing, missing


def _tiers_and_tokens(obs: Observation) -> tuple[list[int], int]:
    tiers: set[int] = set()
    tokens = 0
    for report in obs.reports.values():
        for attempt in report.get("attempts") or []:
            if isinstance(attempt, dict):
                tiers.add(int(attempt.get("tier") or 0))
                tokens += int(attempt.get("tokens") or 0)
    return sorted(tiers), tokens


def judge(obs: Observation) -> ScenarioResult:
    scenario = obs.scenario
    primary = _primary(obs.incidents)
    outcome = str(primary["status"]) if primary else ("error" if obs.error else "no incident")
    cls = str(primary.get("classification")) if primary else None
    check, wrong = _hidden_check(obs)
    intent_kept, missing = _intent(obs)
    touched = sorted(k for k in obs.reference_state if obs.user_state.get(k) !=
                     obs.reference_state[k])  # fmt: skip
    untouched = bool(obs.user_state) and not touched
    tiers, tokens = _tiers_and_tokens(obs)
    passed, reason = _verdict(obs, outcome, cls, check, wrong, untouched, missing)
    return ScenarioResult(
        name=scenario.name,
        kind=scenario.kind,
        mode=scenario.mode,
        trap=scenario.trap,
        expect=scenario.expect,
        expect_class=scenario.expect_class,
        outcome=outcome,
        classification=cls,
        attempts=sum(int(i.get("attempts") or 0) for i in obs.incidents),
        tiers=tiers,
        tokens=tokens,
        time_to_final_s=time_to_final_s(primary) if primary else None,
        patchit_wall_s=round(obs.patchit_wall_s, 2),
        hidden_check=check,
        wrong_fix=wrong or bool(missing),
        untouched=untouched,
        touched=touched,
        passed=passed,
        reason=reason,
        incidents=[str(i["id"]) for i in obs.incidents],
        branch=str(primary["branch"]) if primary and primary.get("branch") else None,
        broken_fails=obs.broken_fails,
        error=obs.error,
        intent_kept=intent_kept,
        reverts=bool(missing),
        keeps_missing=missing,
    )


def _verdict(
    obs: Observation,
    outcome: str,
    cls: str | None,
    check: str,
    wrong: bool,
    untouched: bool,
    missing: list[str],
) -> tuple[bool, str]:
    scenario = obs.scenario
    if obs.error:
        return False, f"runner error: {obs.error}"
    if not obs.broken_fails:
        return False, "corpus error: the broken commit does not fail when run plainly"
    if obs.keeps_not_in_change:
        return False, ("corpus error: the breaking commit itself lacks its keeps: "
                       + "; ".join(obs.keeps_not_in_change))  # fmt: skip
    if missing:
        return False, f"wrong fix: the branch reverts the change's intent ({'; '.join(missing)})"
    if wrong:
        return False, f"wrong fix: the branch's hidden check {check}"
    if lost := sorted({p for b in obs.branches for p in b.crlf_lost}):
        return False, f"the branch rewrote the CRLF line ends of {', '.join(lost)}"
    if not untouched:
        return False, "the user's tree/database was touched"
    if scenario.expect == "fixed":
        if outcome == "fixed" and check == "match":
            return True, "fixed; the branch reproduces the good values"
        return False, f"not fixed ({outcome}, {cls})"
    if scenario.expect == "escalated":
        if outcome == "escalated" and cls == scenario.expect_class:
            return True, f"escalated as {cls}"
        return False, f"expected escalated {scenario.expect_class}, got {outcome} {cls}"
    if outcome == "fixed":
        return True, "fixed correctly (the branch reproduces the good values)"
    return True, f"no wrong branch ({outcome}, {cls})"

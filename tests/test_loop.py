"""The loop with a scripted strategy and the real dbt harness: memory and stop rules."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.loop import Context, heal
from patchit.memory import Memory
from patchit.patching.base import Edit, FixIt, PatchCandidate, PriorAttempt
from tests.conftest import commit_all, git, user_dbt_events
from tests.failed_builds import failed_build

pytestmark = pytest.mark.slow

MODEL = "models/marts/daily_revenue.sql"


class Scripted(FixIt):
    """A strategy that proposes exactly the candidates it was given, in order."""

    name: ClassVar[str] = "scripted"
    tag: ClassVar[str] = "other"

    def __init__(self, candidates: list[PatchCandidate]) -> None:
        self.candidates = candidates
        self.seen_history: list[list[PriorAttempt]] = []

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        self.seen_history.append(history)
        return list(self.candidates)


def candidate(replace: str, tag: str, path: str = MODEL) -> PatchCandidate:
    return PatchCandidate(
        strategy="scripted",
        tag=tag,
        rationale=f"use {replace}",
        edits=[Edit(path=path, search="sum(amout)", replace=replace)],
    )


def break_model(repo: Path) -> None:
    model = repo / MODEL
    model.write_text(model.read_text().replace("sum(amount) as revenue", "sum(amout) as revenue"))
    commit_all(repo, "daily_revenue: sum revenue per day")


def failing_event(repo: Path) -> UniversalFailureEvent:
    break_model(repo)
    code, [event] = user_dbt_events(repo, ["build"])
    assert code == 1
    return event


@pytest.fixture
def typo_event(
    shop_repo: Path, built_shop: Path, tmp_path_factory: pytest.TempPathFactory
) -> UniversalFailureEvent:
    """`failing_event(shop_repo)`: `shop_repo` and the event as that failing build leaves them,
    copied from the run's one such build (tests/failed_builds.py)."""
    code, [event] = failed_build(tmp_path_factory, built_shop, shop_repo, "loop", break_model)
    assert code == 1
    return event


def make_ctx(home: Path, strategy: Scripted, **loop: int) -> Context:
    config = PatchitConfig.model_validate({"loop": loop})
    return Context(
        home=home,
        memory=Memory.open(home),
        config=config,
        strategies=[strategy],
        harnesses=[DbtHarness(timeout_s=300)],
    )


def test_memory_rejects_repeats_and_failed_buckets(
    shop_repo: Path, _patchit_home: Path, typo_event: UniversalFailureEvent
) -> None:
    event = typo_event
    wrong = candidate("sum(voucher_amount)", "rename_column")  # binds, but...
    strategy = Scripted(
        [
            # binds (so the screen passes it on), fails in dbt: a failed verification
            candidate("sum(cast(status as integer))", "rename_column"),
            candidate("sum(orders)", "rename_column"),  # same failed bucket: refused
            candidate("sum(amount)", "fix_ref"),  # a new idea: verified
            wrong,
        ]
    )
    ctx = make_ctx(_patchit_home, strategy)
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["failed", "refused", "verified"]
    assert "already failed" in attempts[1].reason
    assert outcome.incident.status == "fixed"
    assert "Could not convert" in attempts[0].verification_output  # dbt's own error is kept
    report = Path(outcome.incident.report_md or "").read_text()
    assert "already failed" in report and "sum(amount)" in report


def test_max_attempts_stops_with_a_report(
    shop_repo: Path, _patchit_home: Path, typo_event: UniversalFailureEvent
) -> None:
    event = typo_event
    strategy = Scripted(
        [
            candidate("sum(cast(status as integer))", "tag_a"),  # bind, then fail in dbt
            candidate("sum(cast(status as bigint))", "tag_b"),
            candidate("sum(amount)", "tag_c"),  # would pass, but the budget is spent
        ]
    )
    ctx = make_ctx(_patchit_home, strategy, max_attempts=2)
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    assert outcome.incident.status == "failed"
    assert outcome.incident.branch is None
    assert [a.outcome for a in ctx.memory.attempts_for(outcome.incident.id)] == ["failed"] * 2
    report = Path(outcome.incident.report_md or "").read_text()
    assert "max attempts (2)" in report
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    assert git(shop_repo, "worktree", "list").count("\n") == 0


class CountingDbtHarness(DbtHarness):
    """The real dbt harness, counting the candidates it verified."""

    def __init__(self) -> None:
        super().__init__(timeout_s=300)
        self.verified: list[str] = []

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        self.verified.append((workspace.root / MODEL).read_text())
        return super().verify(workspace, event)


def test_a_candidate_that_does_not_bind_is_screened_out_before_dbt_runs(
    shop_repo: Path, _patchit_home: Path, typo_event: UniversalFailureEvent
) -> None:
    event = typo_event
    harness = CountingDbtHarness()
    strategy = Scripted(
        [
            candidate("sum(amount_typo)", "rename_column"),  # DuckDB's binder refuses it
            candidate("sum(amount)", "rename_column"),  # same bucket: a screen-out bars none
        ]
    )
    ctx = make_ctx(_patchit_home, strategy, max_attempts=1)
    ctx.harnesses = [harness]
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    assert outcome.incident.status == "fixed"
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["screened_out", "verified"]
    screened = attempts[0]
    assert screened.reason.startswith(f"screen: {MODEL}: Binder Error: Referenced column")
    assert '"amount_typo"' in screened.reason
    assert screened.verification_output.startswith("$ screen: DuckDB EXPLAIN")
    assert screened.duration_ms < 2000  # milliseconds, not a dbt run
    # dbt ran for the survivor (and the data check's baseline), never for the screened-out one
    assert harness.verified and all("sum(amount) as" in text for text in harness.verified)
    assert not any("amount_typo" in text for text in harness.verified)
    branch = outcome.incident.branch or ""
    assert "sum(amount) as revenue" in git(shop_repo, "show", f"{branch}:{MODEL}")
    report = Path(outcome.incident.report_md or "").read_text()
    assert "| screened_out |" in report and "amount_typo" in report


def test_policy_refusal_escalates(shop_repo: Path, _patchit_home: Path) -> None:
    (shop_repo / ".patchit.toml").write_text('[policy]\ndeny = ["models/marts/*"]\n')
    commit_all(shop_repo, "patchit: keep marts hands-off")
    event = failing_event(shop_repo)
    # read at the failing commit's parent, narrowing the operator's (default) policy
    ctx = make_ctx(_patchit_home, Scripted([candidate("sum(amount)", "rename_column")]))
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    assert outcome.incident.status == "escalated"
    [attempt] = ctx.memory.attempts_for(outcome.incident.id)
    assert attempt.outcome == "refused" and attempt.reason.startswith("policy:")
    assert "models/marts/*" in attempt.reason


def test_history_reaches_the_strategy_and_repeats_are_refused(
    shop_repo: Path, _patchit_home: Path, typo_event: UniversalFailureEvent
) -> None:
    event = typo_event
    strategy = Scripted([candidate("sum(cast(status as integer))", "tag_x")])
    ctx = make_ctx(_patchit_home, strategy)
    try:
        first = heal(event, ctx)
        assert first.incident.status == "failed"
        # the same failure, still open for healing (e.g. after a crash): history is handed over
        ctx.memory.transition(first.incident.id, "retry")
        heal(event.model_copy(update={"event_id": "second"}), ctx)
    finally:
        ctx.close()
    assert strategy.seen_history[0] == []
    assert [h.tag for h in strategy.seen_history[1]] == ["tag_x"]
    # the second run proposed the same diff: refused from memory, never verified again
    attempts = ctx.memory.attempts_for(first.incident.id)
    assert [a.outcome for a in attempts] == ["failed", "refused"]
    assert attempts[1].reason.startswith("repeated diff")


def test_one_harness_heals_two_incidents_in_a_row(shop_repo: Path, _patchit_home: Path) -> None:
    """dbt's saved parse names seed files by absolute path: the second incident (a YAML error,
    so the whole project with its seeds is rebuilt) must not read the first one's worktree."""
    from patchit.patching.registry import load_strategies

    ctx = make_ctx(_patchit_home, Scripted([]))
    ctx.strategies = load_strategies()
    try:
        first = heal(failing_event(shop_repo), ctx)
        assert first.incident.status == "fixed"
        model = shop_repo / MODEL
        model.write_text(model.read_text().replace("sum(amout)", "sum(amount)"))
        props = shop_repo / "models" / "marts" / "schema.yml"
        props.write_text(
            props.read_text().replace(
                "      - name: order_date\n        data_tests:\n          - unique\n",
                "      - name: order_date\n        data_tests:\n",
            )
        )
        commit_all(shop_repo, "daily_revenue: fixed; tests reworked")
        code, [event] = user_dbt_events(shop_repo, ["build"])
        assert code == 2
        second = heal(event, ctx)
    finally:
        ctx.close()
    attempts = ctx.memory.attempts_for(second.incident.id)
    assert second.incident.status == "fixed", [a.verification_output[-800:] for a in attempts]

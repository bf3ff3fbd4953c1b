"""The loop with the library's FakeHarness: every decision of `heal()` in milliseconds.

The failures are real (a Python script run by a real interpreter, committed in a real git
repo); only the runtime that re-runs the unit is the fake. Real dbt and Airflow stay in the
tests that are about them (test_loop.py, test_loop_limits.py, test_loop_llm.py).
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from patchit.classify.model import FailureClass
from patchit.config import PatchitConfig
from patchit.errors import PatchitWarning
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Harness, Verification, Workspace
from patchit.harnesses.fake import FakeHarness, fake_verification
from patchit.loop.context import Context
from patchit.loop.loop import HealOutcome, heal
from patchit.memory import Memory
from patchit.patching.base import (
    Edit,
    PatchCandidate,
    PriorAttempt,
    Proposal,
    ProposalRequest,
    Strategy,
)
from patchit.patching.fixits.python_keys import RenameKeyStrategy
from patchit.policy.precheck import precheck
from tests.conftest import git
from tests.evidence.airflow_failures import init_repo, script_failure

JOB = "dags/totals.py"
SOURCE = textwrap.dedent(
    """\
    rows = [{"amount": 3, "day": "mon"}, {"amount": 4, "day": "tue"}]


    def total(rows):
        return sum(row["amout"] for row in rows)


    print(total(rows))
    """
)
BROKEN = 'row["amout"]'
RIGHT = 'row["amount"]'


def edit(replace: str, tag: str = "other", strategy: str = "scripted") -> PatchCandidate:
    return PatchCandidate(
        strategy=strategy,
        tag=tag,
        rationale=f"use {replace}",
        edits=[Edit(path=JOB, search=BROKEN, replace=replace)],
    )


class Scripted:
    """A strategy answering scripted rounds; records every request it got."""

    name: ClassVar[str] = "scripted"
    tag: ClassVar[str] = "other"
    tier: ClassVar[int] = 0

    def __init__(self, *rounds: list[PatchCandidate], pick: str = "first") -> None:
        self.rounds = list(rounds)
        self.pick = pick
        self.requests: list[ProposalRequest] = []
        self.closed = 0

    def propose(self, request: ProposalRequest) -> Proposal:
        self.requests.append(request)
        index = request.round - 1
        return Proposal(
            candidates=self.rounds[index] if index < len(self.rounds) else [],
            more=request.round < len(self.rounds),
            pick="smallest" if self.pick == "smallest" else "first",
        )

    def close(self) -> None:
        self.closed += 1


class Raising(Scripted):
    name: ClassVar[str] = "raising"

    def propose(self, request: ProposalRequest) -> Proposal:
        raise ValueError("a bug in a plugin")


@pytest.fixture
def event(tmp_path: Path) -> UniversalFailureEvent:
    repo = init_repo(tmp_path / "repo")
    return script_failure(repo, JOB, SOURCE, "total")


@pytest.fixture
def memory(_patchit_home: Path) -> Iterator[Memory]:
    with Memory.open(_patchit_home) as memory:
        yield memory


def make_ctx(
    home: Path,
    memory: Memory,
    strategies: list[Strategy],
    harnesses: list[Harness],
    **loop: int,
) -> Context:
    config = PatchitConfig.model_validate({"loop": loop})
    return Context(home, memory, config, strategies, harnesses)


def run(ctx: Context, event: UniversalFailureEvent) -> HealOutcome:
    try:
        return heal(event, ctx)
    finally:
        ctx.close()


def user_tree(repo: Path) -> tuple[str, str, str]:
    return (
        git(repo, "status", "--porcelain", "--ignored"),
        git(repo, "rev-parse", "HEAD"),
        (repo / JOB).read_text(),
    )


def test_first_verified_candidate_lands_on_a_branch_and_the_user_tree_is_untouched(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    before = user_tree(repo)
    harness = FakeHarness.passing_when(JOB, RIGHT)
    strategy = Scripted([edit('row["amt"]', "wrong_key"), edit(RIGHT, "rename_key"), edit("x")])
    outcome = run(make_ctx(_patchit_home, memory, [strategy], [harness]), event)
    incident = outcome.incident
    assert (incident.status, incident.classification) == ("fixed", FailureClass.CODE_BUG.value)
    assert incident.branch == f"patchit/{incident.id}"
    assert [c.files[JOB].count(RIGHT) for c in harness.calls] == [0, 1]  # 3rd never tried
    assert [a.outcome for a in memory.attempts_for(incident.id)] == ["failed", "verified"]
    assert RIGHT in git(repo, "show", f"{incident.branch}:{JOB}")
    assert git(repo, "rev-parse", f"{incident.branch}~1") == event.commit
    assert user_tree(repo) == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert harness.warm_ups == 1 and harness.closed == 1 and strategy.closed == 1
    report = Path(incident.report_md or "").read_text()
    assert "fake" in report and RIGHT in report
    assert any(c.startswith("git") for c in outcome.commands)


def test_a_screened_out_candidate_never_reaches_the_harness_nor_spends_an_attempt(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    wrong = 'row["amout_cents"]'
    harness = FakeHarness.passing_when(JOB, RIGHT)
    harness.screener = FakeHarness.screening_out(JOB, wrong)
    # one bucket, one attempt: a screen-out bars neither the bucket nor the budget
    strategy = Scripted([edit(wrong, "rename_key"), edit(RIGHT, "rename_key")])
    ctx = make_ctx(_patchit_home, memory, [strategy], [harness], max_attempts=1)
    outcome = run(ctx, event)
    incident = outcome.incident
    assert incident.status == "fixed"
    attempts = memory.attempts_for(incident.id)
    assert [a.outcome for a in attempts] == ["screened_out", "verified"]
    assert attempts[0].reason == f"screen: {JOB}: {wrong!r} does not bind"
    assert attempts[0].verification_output.startswith("$ screen: fake screen")
    assert wrong in attempts[0].diff
    assert [s.result.passed for s in harness.screens] == [False, True]
    assert [RIGHT in c.files[JOB] for c in harness.calls] == [True]  # one verify: the survivor
    assert memory.attempt_count(incident.fingerprint) == 1
    # the screened-out diff is remembered: never tried again for this fingerprint
    refusal = precheck(
        edit(wrong, "rename_key"), attempts[0].diff, incident.fingerprint,
        Path(event.repo_path or ""), ctx.config.policy, memory,
    )  # fmt: skip
    assert refusal is not None and refusal.startswith("repeated diff")
    report = Path(incident.report_md or "").read_text()
    assert "| screened_out |" in report and "does not bind" in report
    assert "Attempt 1 screen output (<code>screen: fake screen</code>)" in report


def test_a_screen_that_raises_is_reported_and_the_candidate_verified(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("screen bug")

    harness = FakeHarness.passing_when(JOB, RIGHT)
    harness.screener = broken
    ctx = make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT, "rename_key")])], [harness])
    with pytest.warns(PatchitWarning, match="screen failed.*screen bug"):
        outcome = run(ctx, event)
    assert outcome.incident.status == "fixed" and len(harness.calls) == 1


def test_memory_refuses_a_failed_bucket_and_feeds_history_to_the_next_round(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    strategy = Scripted(
        [edit('row["amt"]', "wrong_key")],
        [edit('row["amnt"]', "wrong_key"), edit(RIGHT, "rename_key")],
    )
    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, [strategy], [harness]), event)
    attempts = memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["failed", "refused", "verified"]
    assert "already failed" in attempts[1].reason
    assert [r.round for r in strategy.requests] == [1, 2]
    second: list[PriorAttempt] = strategy.requests[1].history
    assert [(h.tag, h.outcome) for h in second] == [("wrong_key", "failed")]
    assert strategy.requests[1].incident_id == outcome.incident.id
    assert strategy.requests[1].ledger is not None


def test_a_round_of_alternatives_lands_the_smallest_passing_diff(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    long_fix = 'row.get("amount", row.get("amout"))  # either key'
    strategy = Scripted([edit(long_fix), edit(RIGHT), edit("0")], pick="smallest")

    def handler(ws: Workspace, _ev: UniversalFailureEvent) -> bool:
        return "sum(0 for" not in (ws.root / JOB).read_text()  # "0" binds, but is wrong

    harness = FakeHarness(handler)
    outcome = run(make_ctx(_patchit_home, memory, [strategy], [harness]), event)
    assert outcome.incident.status == "fixed" and len(harness.calls) == 3
    repo = Path(event.repo_path or "")
    assert RIGHT + " for row" in git(repo, "show", f"{outcome.incident.branch}:{JOB}")


def test_max_attempts_stops_with_a_root_cause_report(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    strategy = Scripted([edit("1", "a"), edit("2", "b"), edit(RIGHT, "c")])
    harness = FakeHarness.passing_when(JOB, RIGHT)
    ctx = make_ctx(_patchit_home, memory, [strategy], [harness], max_attempts=2)
    outcome = run(ctx, event)
    assert outcome.incident.status == "failed" and outcome.incident.branch is None
    assert len(harness.calls) == 2
    report = Path(outcome.incident.report_md or "").read_text()
    assert "max attempts (2) for this fingerprint reached" in report


def test_a_raising_strategy_is_a_failed_attempt_and_the_search_goes_on(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    strategies: list[Strategy] = [Raising(), Scripted([edit(RIGHT)])]
    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, strategies, [harness]), event)
    assert outcome.incident.status == "fixed"
    raised, fixed = memory.attempts_for(outcome.incident.id)
    assert (raised.strategy, raised.outcome, raised.files) == ("raising", "error", [])
    assert raised.reason == "the strategy raised ValueError: a bug in a plugin"
    assert "Traceback" in raised.verification_output
    assert fixed.outcome == "verified"
    # an error is not a run: it spends none of the fingerprint's attempts
    assert memory.attempt_count(outcome.incident.fingerprint) == 1
    report = Path(outcome.incident.report_md or "").read_text()
    assert "| raising | 0 | other |  | error | the strategy raised ValueError" in report


def test_a_strategy_that_only_raises_is_named_in_the_stop_and_the_timeline(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness()
    outcome = run(make_ctx(_patchit_home, memory, [Raising()], [harness]), event)
    assert outcome.incident.status == "failed" and harness.calls == []
    [raised] = memory.attempts_for(outcome.incident.id)
    assert raised.outcome == "error"
    report = Path(outcome.incident.report_md or "").read_text()
    assert "raising raised ValueError: a bug in a plugin" in report  # the stop line
    assert "Attempt 1 strategy output" in report and "raise ValueError" in report
    html = Path(outcome.incident.report_md or "").with_suffix(".html").read_text()
    assert "outcome-error" in html and "a bug in a plugin" in html


def test_a_tier_that_must_stop_ends_the_search_with_its_reason(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    class Spent(Scripted):
        name: ClassVar[str] = "spent"
        tier: ClassVar[int] = 1

        def propose(self, request: ProposalRequest) -> Proposal:
            return Proposal(stop="LLM tier stopped: daily budget spent", status="tier 1 (x)")

    later = Scripted([edit(RIGHT)])
    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, [Spent(), later], [harness]), event)
    assert outcome.incident.status == "failed" and later.requests == []
    report = Path(outcome.incident.report_json or "").read_text()
    assert "daily budget spent" in report and "tier 1 (x)" in report


def test_nothing_proposed_is_failed_and_says_so(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness()
    outcome = run(make_ctx(_patchit_home, memory, [Scripted()], [harness]), event)
    assert outcome.incident.status == "failed" and harness.calls == []
    report = Path(outcome.incident.report_md or "").read_text()
    assert "no strategy proposed a patch" in report


def test_a_candidate_needing_the_network_escalates_without_trying_more(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    def handler(_ws: Workspace, ev: UniversalFailureEvent) -> Verification:
        return fake_verification(ev, False, "connect: blocked", limit_hit="network")

    harness = FakeHarness(handler)
    strategy = Scripted([edit("1"), edit(RIGHT)])
    outcome = run(make_ctx(_patchit_home, memory, [strategy], [harness]), event)
    assert outcome.incident.status == "escalated" and len(harness.calls) == 1
    assert "needs the network" in Path(outcome.incident.report_md or "").read_text()


def test_a_runaway_candidate_is_a_limit_not_an_idea(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    def handler(ws: Workspace, ev: UniversalFailureEvent) -> bool:
        text = (ws.root / JOB).read_text()
        if "iter(int, 1)" in text:
            time.sleep(3)  # "runs forever": well past the limit
        return RIGHT in text

    harness = FakeHarness(handler, timeout_s=0.5)
    strategy = Scripted([edit("next(x for x in iter(int, 1) while 1)"), edit(RIGHT)])
    outcome = run(make_ctx(_patchit_home, memory, [strategy], [harness]), event)
    attempts = memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["harness_limit", "verified"]
    assert memory.attempt_count(outcome.incident.fingerprint) == 1


def test_not_a_code_bug_is_escalated_without_a_harness_run(
    tmp_path: Path, memory: Memory, _patchit_home: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    source = 'import socket\nsocket.create_connection(("127.0.0.1", 9), timeout=2)\n'
    event = script_failure(repo, "dags/ping.py", source, "ping")
    harness = FakeHarness(lambda _ws, _ev: True)
    strategy = Scripted([edit(RIGHT)])
    outcome = run(make_ctx(_patchit_home, memory, [strategy], [harness]), event)
    assert outcome.incident.status == "escalated"
    assert outcome.incident.classification != FailureClass.CODE_BUG.value
    assert harness.calls == [] and strategy.requests == []


def test_no_harness_for_a_code_bug_fails_with_the_reason(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness(applies=False)
    outcome = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    assert outcome.incident.status == "failed"
    report = Path(outcome.incident.report_md or "").read_text()
    assert "patchit could not finish" in report and "no installed harness" in report


def test_a_fixed_incident_is_not_healed_again(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness.passing_when(JOB, RIGHT)
    first = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), event)
    again = event.model_copy(update={"event_id": "second"})
    second = run(make_ctx(_patchit_home, memory, [Scripted([edit(RIGHT)])], [harness]), again)
    assert (second.incident.id, second.incident.status, second.created) == (
        first.incident.id, "fixed", False,
    )  # fmt: skip
    assert len(harness.calls) == 1


def test_the_builtin_fix_it_heals_the_key_error_through_the_fake_runtime(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, [RenameKeyStrategy()], [harness]), event)
    assert outcome.incident.status == "fixed"
    [attempt] = memory.attempts_for(outcome.incident.id)
    assert (attempt.strategy, attempt.tag) == ("python_rename_key", "rename_key")


def test_a_user_who_committed_more_work_still_gets_the_fix_for_the_failing_commit(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    repo = Path(event.repo_path or "")
    git(repo, "switch", "-q", "-c", "feature")
    (repo / JOB).write_text("# totals, by day\n" + (repo / JOB).read_text())
    git(repo, "commit", "-qam", "totals: document")
    before = user_tree(repo)
    harness = FakeHarness.passing_when(JOB, RIGHT)
    outcome = run(make_ctx(_patchit_home, memory, [RenameKeyStrategy()], [harness]), event)
    assert outcome.incident.status == "fixed"
    assert git(repo, "rev-parse", f"{outcome.incident.branch}~1") == event.commit
    assert user_tree(repo) == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_huge_message_heals_in_seconds(
    event: UniversalFailureEvent, memory: Memory, _patchit_home: Path
) -> None:
    """Issue 12: the URL-password pattern was quadratic; a 50 KB message took 40 s to heal and
    5 MB never finished. Intake caps a field and the redactor runs in linear time."""
    from tests.fuzzing import hang_guard

    huge = "a." * 2_500_000 + " password=hunter2-huge"  # 5 MB: the old pattern's worst case
    big = UniversalFailureEvent.model_validate(
        {**event.model_dump(), "error_message": event.error_message + "\n" + huge}
    )
    strategy = Scripted([edit(RIGHT, "rename_key")])
    started = time.monotonic()
    with hang_guard(120):
        outcome = run(
            make_ctx(_patchit_home, memory, [strategy], [FakeHarness.passing_when(JOB, RIGHT)]), big
        )
    assert outcome.incident.status == "fixed"
    assert time.monotonic() - started < 60
    report = Path(outcome.incident.report_md or "").read_text()
    assert "hunter2-huge" not in report and "characters ..." in report

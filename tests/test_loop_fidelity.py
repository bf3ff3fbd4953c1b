"""The data-aware check inside the real loop (real dbt-duckdb): a candidate that turns the run
green by reading the wrong one of two similar columns never reaches a branch."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.loop.loop import heal
from tests.conftest import git
from tests.test_loop import Scripted, candidate, failing_event, make_ctx

pytestmark = pytest.mark.slow

WRONG = "sum(card_amount)"  # binds, runs, passes every test: and changes the revenue
RIGHT = "sum(amount)"


def test_wrong_column_is_escalated_for_review(shop_repo: Path, _patchit_home: Path) -> None:
    event = failing_event(shop_repo)
    ctx = make_ctx(_patchit_home, Scripted([candidate(WRONG, "rename_column")]))
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    [attempt] = ctx.memory.attempts_for(outcome.incident.id)
    assert attempt.outcome == "needs_review"
    assert "revenue" in attempt.verification_output  # the column that differs is named
    assert outcome.incident.status == "escalated" and outcome.incident.branch is None
    assert git(shop_repo, "branch", "--list", "patchit/*") == ""
    report = Path(outcome.incident.report_md or "").read_text()
    assert "## Data check: needs review" in report and "daily_revenue" in report
    listed = subprocess.run(
        [sys.executable, "-m", "patchit", "incidents", "--json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    [row] = json.loads(listed)
    assert row["needs_review"] is True and row["status"] == "escalated"


def test_the_right_column_after_a_wrong_one_is_fixed(shop_repo: Path, _patchit_home: Path) -> None:
    event = failing_event(shop_repo)
    strategy = Scripted([candidate(WRONG, "tag_wrong"), candidate(RIGHT, "tag_right")])
    ctx = make_ctx(_patchit_home, strategy)
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    attempts = ctx.memory.attempts_for(outcome.incident.id)
    assert [a.outcome for a in attempts] == ["needs_review", "verified"]
    assert outcome.incident.status == "fixed"
    assert RIGHT in git(shop_repo, "show", str(outcome.incident.branch))
    report = json.loads(Path(outcome.incident.report_json or "").read_text())
    assert "data check: same as baseline" in report["verification"]
    assert report["needs_review"] is False


class _Timed(DbtHarness):
    """The dbt harness, recording when each verify ran and on which tree."""

    def __init__(self) -> None:
        super().__init__(timeout_s=300)
        self.runs: list[tuple[str, float, float]] = []

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        started = time.monotonic()
        try:
            return super().verify(workspace, event)
        finally:
            kind = "baseline" if "baseline" in workspace.root.parts else "candidate"
            self.runs.append((kind, started, time.monotonic()))


def test_the_baseline_is_built_beside_the_first_candidate(
    shop_repo: Path, _patchit_home: Path
) -> None:
    event = failing_event(shop_repo)
    harness = _Timed()
    ctx = make_ctx(_patchit_home, Scripted([candidate(RIGHT, "tag_right")]))
    ctx.harnesses = [harness]
    try:
        outcome = heal(event, ctx)
    finally:
        ctx.close()
    assert outcome.incident.status == "fixed"
    runs = {kind: (start, end) for kind, start, end in harness.runs}
    assert sorted(runs) == ["baseline", "candidate"]  # one baseline run: the outputs agreed
    # it started before the candidate's verification ended, not after it
    assert runs["baseline"][0] < runs["candidate"][1]

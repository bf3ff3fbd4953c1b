"""The contract every harness passes (as dbt adapters share one conformance suite).

Four properties, whatever the runtime: it passes a good unit; it fails a broken one with the
error captured in its output; it honours its time limit; it leaves the user's tree alone. And
the loop drives it only through its protocol: configure, warm up, screen, verify, release,
close. Its screen never rejects a good unit, rejects a broken one only where the case says this
harness's screen can be sure of it (with the runtime's error), and writes nothing in the user's
tree.

A harness's test module subclasses `HarnessContract` and provides three fixtures:
`harness` (a ready instance), `slow_harness` (the same harness with `timeout_s=3`), and
`make_case(kind)` building a `HarnessCase` for kind "good", "broken" or "slow" in a fresh
user repository; the contract does the rest.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Harness, Workspace
from tests.conftest import git

SLOW_TIMEOUT_S = 3.0


@dataclass
class HarnessCase:
    """One failed unit to re-run: the user's repo, the sandbox, and what to expect."""

    user_repo: Path
    workspace: Workspace
    event: UniversalFailureEvent
    expected_error: str = ""
    protected_files: list[Path] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # what the case edits, repo-relative
    screened_out: bool = False  # the harness's screen is sure the (broken) case fails


MakeCase = Callable[[str], HarnessCase]


def user_state(case: HarnessCase) -> dict[str, str]:
    """Git's view of the user's repo plus the bytes of every file in it (ignored ones too:
    git status cannot see an ignored database or cache being rewritten)."""
    repo = case.user_repo
    state = {
        "status": git(repo, "status", "--porcelain", "--ignored"),
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "branches": git(repo, "branch", "--list"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
    }
    for path in sorted(repo.rglob("*")):
        if ".git" in path.relative_to(repo).parts or not path.is_file():
            continue
        state[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    for path in case.protected_files:
        state[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


class HarnessContract:
    def test_is_a_harness(self, harness: Harness, make_case: MakeCase) -> None:
        case = make_case("good")
        assert isinstance(harness, Harness)
        assert harness.name
        assert harness.applies_to(case.event, case.user_repo)

    def test_configure_warm_up_and_close_as_the_loop_calls_them(
        self, harness: Harness, make_case: MakeCase
    ) -> None:
        case = make_case("good")
        harness.configure(PatchitConfig.model_validate({"loop": {"harness_timeout_s": 120}}))
        harness.warm_up(case.event)  # never raises: a runtime that cannot start is verify's answer
        harness.release(case.user_repo.parent / "sandboxes" / "no-such-incident")  # nothing made
        harness.close()
        harness.close()  # idempotent

    def test_screen_passes_a_good_unit_on(self, harness: Harness, make_case: MakeCase) -> None:
        case = make_case("good")
        screening = harness.screen(case.workspace, case.event, case.changed)
        assert screening.passed, screening.output
        assert screening.reason == ""
        assert screening.check
        assert screening.duration_ms >= 0

    def test_screen_rejects_only_what_it_is_sure_of(
        self, harness: Harness, make_case: MakeCase
    ) -> None:
        case = make_case("broken")
        assert case.changed, "a broken case names the files it edits"
        before = user_state(case)
        screening = harness.screen(case.workspace, case.event, case.changed)
        assert screening.passed is not case.screened_out, screening
        if not screening.passed:
            assert screening.reason
            assert case.expected_error in screening.output
            assert set(screening.screened) & set(case.changed)
        assert user_state(case) == before

    def test_passes_a_good_unit(self, harness: Harness, make_case: MakeCase) -> None:
        case = make_case("good")
        result = harness.verify(case.workspace, case.event)
        assert result.passed, result.output
        assert result.failures == []
        assert result.harness == harness.name
        assert result.command
        assert result.limit_hit is None
        assert result.duration_ms > 0

    def test_fails_a_broken_unit_with_the_error(
        self, harness: Harness, make_case: MakeCase
    ) -> None:
        case = make_case("broken")
        assert case.expected_error, "a broken case names the error it must show"
        result = harness.verify(case.workspace, case.event)
        assert not result.passed
        assert case.event.unit_id in result.failures
        assert case.expected_error in result.output
        assert result.limit_hit is None
        assert result.harness == harness.name
        assert result.command
        assert result.isolation

    def test_honours_the_timeout(self, slow_harness: Harness, make_case: MakeCase) -> None:
        case = make_case("slow")
        started = time.monotonic()
        result = slow_harness.verify(case.workspace, case.event)
        elapsed_s = time.monotonic() - started
        assert not result.passed
        assert result.limit_hit == "time"
        assert case.event.unit_id in result.failures
        # Killed at the limit, not left to finish a query that would run for hours.
        assert elapsed_s < SLOW_TIMEOUT_S + 20, elapsed_s

    def test_leaves_the_users_tree_alone(self, harness: Harness, make_case: MakeCase) -> None:
        case = make_case("broken")
        before = user_state(case)
        harness.verify(case.workspace, case.event)
        after = user_state(case)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert changed == []

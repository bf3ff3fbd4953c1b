"""FakeHarness, the library's stand-in runtime, passes the same contract as the real ones."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Harness, Screening, Verification, Workspace
from patchit.harnesses.fake import FakeHarness, fake_verification
from tests.conftest import commit_all, git
from tests.harnesses.contract import SLOW_TIMEOUT_S, HarnessCase, HarnessContract, MakeCase

JOB = "jobs/report.py"


def screen_job(
    workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
) -> str | None:
    """The fake's screen: sure that a job raising at import fails, as a compiler is sure of a
    SyntaxError."""
    text = (workspace.root / JOB).read_text()
    return "KeyError: 'amout' (raised at import)" if "raise" in text else None


def run_job(workspace: Workspace, event: UniversalFailureEvent) -> Verification:
    """The fake's runtime: 'runs' the job by reading it, as a test double would."""
    text = (workspace.root / JOB).read_text()
    if "sleep" in text:
        time.sleep(60)
    if "raise" in text:
        return fake_verification(event, False, "KeyError: 'amout'")
    return fake_verification(event, True, "ok")


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "user-repo"
    (repo / "jobs").mkdir(parents=True)
    (repo / JOB).write_text("print('report')\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "report job")
    return repo


class TestFakeHarnessContract(HarnessContract):
    @pytest.fixture
    def harness(self) -> FakeHarness:
        return FakeHarness(run_job, screener=screen_job)

    @pytest.fixture
    def slow_harness(self) -> FakeHarness:
        return FakeHarness(run_job, timeout_s=SLOW_TIMEOUT_S)

    @pytest.fixture
    def make_case(self, user_repo: Path, tmp_path: Path) -> MakeCase:
        def make(kind: str) -> HarnessCase:
            root = tmp_path / f"worktree-{kind}"
            git(user_repo, "worktree", "add", "-q", "--detach", str(root), "HEAD")
            body = {"good": "print('ok')\n", "broken": "raise KeyError('amout')\n"}
            (root / JOB).write_text(body.get(kind, "sleep()\n"))
            event = UniversalFailureEvent(
                source="python", pipeline_id="jobs", unit_id="report", repo_path=str(user_repo)
            )
            workspace = Workspace(root=root, scratch=tmp_path / f"scratch-{kind}")
            expected = "KeyError: 'amout'" if kind == "broken" else ""
            return HarnessCase(
                user_repo, workspace, event, expected_error=expected, changed=[JOB],
                screened_out=kind == "broken",
            )  # fmt: skip

        return make


def test_passing_when_reads_the_patched_worktree_and_records_each_call(tmp_path: Path) -> None:
    harness = FakeHarness.passing_when(JOB, "amount")
    assert isinstance(harness, Harness)
    (tmp_path / "jobs").mkdir()
    event = UniversalFailureEvent(source="python", pipeline_id="jobs", unit_id="report")
    workspace = Workspace(root=tmp_path, scratch=tmp_path / "scratch")
    (tmp_path / JOB).write_text('row["amout"]\n')
    assert not harness.verify(workspace, event).passed
    (tmp_path / JOB).write_text('row["amount"]\n')
    assert harness.verify(workspace, event).passed
    assert [c.files[JOB] for c in harness.calls] == ['row["amout"]\n', 'row["amount"]\n']
    assert [c.result.passed for c in harness.calls] == [False, True]


def test_configure_warm_up_and_close_are_recorded() -> None:
    harness = FakeHarness()
    config = PatchitConfig.model_validate({"loop": {"harness_timeout_s": 7}})
    harness.configure(config)
    harness.warm_up()
    harness.close()
    harness.close()
    assert (harness.config, harness.timeout_s, harness.warm_ups, harness.closed) == (
        config, 7, 1, 2,
    )  # fmt: skip


def test_a_handler_that_raises_raises_in_the_caller(tmp_path: Path) -> None:
    def broken(_ws: Workspace, _ev: UniversalFailureEvent) -> bool:
        raise RuntimeError("the runtime is missing")

    event = UniversalFailureEvent(source="python", pipeline_id="jobs", unit_id="report")
    with pytest.raises(RuntimeError, match="runtime is missing"):
        FakeHarness(broken).verify(Workspace(root=tmp_path, scratch=tmp_path), event)


def test_the_screener_answers_a_reason_none_or_a_screening(tmp_path: Path) -> None:
    event = UniversalFailureEvent(source="python", pipeline_id="jobs", unit_id="report")
    workspace = Workspace(root=tmp_path, scratch=tmp_path / "scratch")
    (tmp_path / "jobs").mkdir()
    (tmp_path / JOB).write_text('row["amout_cents"]\n')

    nothing = FakeHarness().screen(workspace, event, [JOB])
    assert nothing.passed and nothing.screened == [] and "nothing judged" in nothing.check

    harness = FakeHarness.passing_when(JOB, "amount")
    harness.screener = FakeHarness.screening_out(JOB, "amout_cents")
    rejected = harness.screen(workspace, event, [JOB])
    assert not rejected.passed
    assert rejected.reason == f"{JOB}: 'amout_cents' does not bind"
    assert rejected.screened == [JOB] and rejected.duration_ms >= 1
    (tmp_path / JOB).write_text('row["amount"]\n')
    passed = harness.screen(workspace, event, [JOB])
    assert passed.passed and passed.screened == [JOB]
    assert [(s.changed, s.result.passed) for s in harness.screens] == [
        ([JOB], False),
        ([JOB], True),
    ]
    assert harness.calls == []  # a screen is no verify

    own = Screening(passed=False, check="mine", reason="no", duration_ms=5)
    assert FakeHarness(screener=lambda *_: own).screen(workspace, event, []) == own

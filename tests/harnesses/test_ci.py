"""CiHarness: the run steps of a real GitHub Actions workflow file, in git worktrees."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.errors import HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.ci import CiHarness
from patchit.harnesses.ci_workflow import find_job
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import commit_all
from tests.harnesses.contract import SLOW_TIMEOUT_S, HarnessCase, HarnessContract, MakeCase
from tests.harnesses.python_fixtures import break_settings, make_python_repo, python_event


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    return make_python_repo(tmp_path / "user-repo")


@pytest.fixture
def make_case(user_repo: Path, _patchit_home: Path) -> Iterator[MakeCase]:
    roots: list[Path] = []

    def make(kind: str) -> HarnessCase:
        root = create_worktree(user_repo, "HEAD", worktrees_home() / f"{kind}-{len(roots)}")
        roots.append(root)
        expected = break_settings(root) if kind == "broken" else ""
        scratch = _patchit_home / "scratch" / f"{kind}-{len(roots)}"
        return HarnessCase(
            user_repo=user_repo,
            workspace=Workspace(root=root, scratch=scratch),
            event=python_event(user_repo, "slow" if kind == "slow" else "test", source="ci",
                               context={"workflow": ".github/workflows/ci.yml"}),
            expected_error=expected,
            changed=["shop/jobs.py"],
        )  # fmt: skip

    yield make
    for root in roots:
        remove_worktree(user_repo, root)


class TestCiHarness(HarnessContract):
    @pytest.fixture
    def harness(self) -> CiHarness:
        return CiHarness()

    @pytest.fixture
    def slow_harness(self) -> CiHarness:
        return CiHarness(timeout_s=SLOW_TIMEOUT_S)

    def test_runs_the_jobs_run_steps_only(self, harness: CiHarness, make_case: MakeCase) -> None:
        case = make_case("good")
        result = harness.verify(case.workspace, case.event)
        assert result.passed, result.output
        lines = result.output.splitlines()
        assert lines[0] == "patchit: .github/workflows/ci.yml:test: 3 run step(s)"
        assert "skipped 'actions/checkout@v4': an action (uses:), not a command" in lines
        assert "skipped 'Upload on failure': runs only on failure, cancel or always()" in lines
        assert [line.split(" (")[0] for line in lines if line.startswith("ok: ")] == [
            "ok: Install", "ok: Report", "ok: Tests",
        ]  # fmt: skip
        # ${{ env.REPORT_DIR }} came from the workflow's env: the report went to output/.
        assert (case.workspace.root / "output" / "report.json").is_file()
        assert "python -m pytest -q -p no:cacheprovider tests/test_jobs.py" in result.command
        assert result.command.startswith(f"cd {case.workspace.root} && bash --noprofile")

    def test_the_failing_step_is_named_and_later_steps_do_not_run(
        self, harness: CiHarness, make_case: MakeCase
    ) -> None:
        case = make_case("broken")
        result = harness.verify(case.workspace, case.event)
        assert not result.passed
        assert "failed: Report (" in result.output
        assert "--- output of the failing step 'Report' ---" in result.output
        assert "Tests (" not in result.output
        assert result.failures == ["test"]

    def test_a_broken_workflow_step_is_caught(
        self, harness: CiHarness, make_case: MakeCase
    ) -> None:
        case = make_case("good")
        workflow = case.workspace.root / ".github" / "workflows" / "ci.yml"
        workflow.write_text(
            workflow.read_text().replace("-k write_report", "-k write_report && false")
        )
        commit_all(case.workspace.root, "ci: a step that fails")
        result = harness.verify(case.workspace, case.event)
        assert not result.passed
        assert "failed: Tests (" in result.output and "exit 1" in result.output
        assert "1 passed" in result.output  # the failing step's own output is there

    def test_configured_commands_replace_the_workflow(self, make_case: MakeCase) -> None:
        case = make_case("broken")
        harness = CiHarness(commands=["echo first", "python -m pytest -q tests -k write_report"])
        result = harness.verify(case.workspace, case.event)
        assert not result.passed
        assert "ok: echo first" in result.output
        assert "KeyError: 'curency'" in result.output
        assert result.output.startswith("patchit: configured commands: 2 run step(s)")


def test_finding_the_job(user_repo: Path, tmp_path: Path) -> None:
    def job(unit_id: str, **context: object) -> str:
        event = python_event(user_repo, unit_id, source="ci", context=context)
        return find_job(user_repo, event, tmp_path).label

    assert job("test") == ".github/workflows/ci.yml:test"
    assert job("lint (3.11)") == ".github/workflows/ci.yml:lint"
    with pytest.raises(HarnessError, match="no CI job 'deploy' in workflows"):
        job("deploy")
    with pytest.raises(HarnessError, match=r"workflow release\.yml is not in"):
        job("test", workflow="release.yml")
    other = user_repo / ".github" / "workflows" / "nightly.yaml"
    other.write_text("jobs:\n  test:\n    steps:\n      - run: echo nightly\n")
    with pytest.raises(HarnessError, match="is in several workflows"):
        job("test")
    assert job("test", workflow="nightly.yaml") == ".github/workflows/nightly.yaml:test"


def test_expressions_matrix_and_shells(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text(
        """
jobs:
  test:
    strategy:
      matrix:
        python: ["3.12", "3.11"]
    services:
      postgres:
        image: postgres:16
    defaults:
      run:
        working-directory: src
    steps:
      - run: echo ${{ matrix.python }} ${{ secrets.TOKEN }}
        env:
          DEBUG: true
      - run: print("hi")
        shell: python
      - run: Write-Host hi
        shell: pwsh
"""
    )
    event = UniversalFailureEvent(source="ci", pipeline_id="x", unit_id="test")
    with pytest.raises(HarnessError, match="shell 'pwsh' cannot run here"):
        find_job(root, event, tmp_path)
    workflow = root / ".github" / "workflows" / "ci.yml"
    workflow.write_text(workflow.read_text().replace("shell: pwsh", "shell: sh"))
    job = find_job(root, event, tmp_path)
    first, second, third = job.steps
    assert first.script == "echo 3.12 " and first.env == {"DEBUG": "true"}
    assert first.working_directory == "src"
    assert second.shell == ["python", "{0}"] and third.shell == ["sh", "-e", "{0}"]
    assert any("secrets.TOKEN" in note for note in job.notes)
    assert any("services/container are not started" in note for note in job.notes)
    event.context["matrix"] = {"python": "3.11"}
    assert find_job(root, event, tmp_path).steps[0].script == "echo 3.11 "

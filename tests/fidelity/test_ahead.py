"""The baseline built beside the first candidate: one build, kept only when it is green (a
stand-in harness, real git)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import ClassVar

from patchit.config import PatchitConfig
from patchit.events.model import UniversalFailureEvent
from patchit.fidelity.ahead import BaselineAhead
from patchit.fidelity.baseline import BaselineRunner
from patchit.harnesses.base import Screening, Verification, Workspace
from tests.conftest import commit_all, git


class _Stand:
    """Verifies by answering `passed`; counts its calls; blocks until `go` is set."""

    name: ClassVar[str] = "airflow"
    concurrent_verify: ClassVar[bool] = True

    def __init__(self, passed: bool) -> None:
        self.passed, self.calls = passed, 0
        self.started, self.go = threading.Event(), threading.Event()

    def verify(self, workspace: Workspace, event: UniversalFailureEvent) -> Verification:
        self.calls += 1
        self.started.set()
        self.go.wait(30)
        return Verification(passed=self.passed, harness=self.name, command="stand-in")

    def configure(self, config: PatchitConfig) -> None: ...
    def warm_up(self) -> None: ...
    def applies_to(self, event: UniversalFailureEvent, repo: Path) -> bool:
        return True

    def screen(
        self, workspace: Workspace, event: UniversalFailureEvent, changed: list[str]
    ) -> Screening:
        return Screening.nothing("stand-in")

    def close(self) -> None: ...


def _repo(tmp_path: Path) -> tuple[Path, UniversalFailureEvent]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "dag.py").write_text("good\n")
    commit_all(repo, "good")
    (repo / "dag.py").write_text("broken\n")
    failing = commit_all(repo, "broken")
    event = UniversalFailureEvent(source="airflow", pipeline_id="p", unit_id="p.t",
                                  repo_path=str(repo), commit=failing)  # fmt: skip
    return repo, event


def test_the_build_runs_in_a_thread_and_the_check_reads_it(tmp_path: Path) -> None:
    repo, event = _repo(tmp_path)
    harness = _Stand(passed=True)
    ahead = BaselineAhead(event, repo, harness, None, tmp_path / "work", None)  # type: ignore[arg-type]
    assert ahead.start()
    assert harness.started.wait(30)  # running while the caller goes on (to its own verify)
    harness.go.set()
    ahead.wait()
    assert ahead.start() and harness.calls == 1  # once per incident
    baseline, _ = BaselineRunner(event, repo, harness, None, tmp_path / "work").first(None)  # type: ignore[arg-type]
    assert baseline is not None and harness.calls == 1  # read, not built again


def test_a_baseline_that_did_not_build_is_not_kept_for_the_check(tmp_path: Path) -> None:
    repo, event = _repo(tmp_path)
    harness = _Stand(passed=False)
    harness.go.set()
    ahead = BaselineAhead(event, repo, harness, None, tmp_path / "work", None)  # type: ignore[arg-type]
    ahead.start()
    ahead.wait()
    assert "did not build green" in ahead.error
    assert not ahead.runner.state_path.exists()  # the check tries again once a candidate passed


def test_a_harness_that_verifies_one_at_a_time_builds_nothing_ahead(tmp_path: Path) -> None:
    repo, event = _repo(tmp_path)
    harness = _Stand(passed=True)
    harness.concurrent_verify = False  # type: ignore[misc]
    ahead = BaselineAhead(event, repo, harness, None, tmp_path / "work", None)  # type: ignore[arg-type]
    assert not ahead.start()
    ahead.wait()
    assert harness.calls == 0


def _worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]  # fmt: skip


def test_a_prepared_baseline_builds_on_its_tree_once_started(tmp_path: Path) -> None:
    repo, event = _repo(tmp_path)
    harness = _Stand(passed=True)
    harness.go.set()
    ahead = BaselineAhead(event, repo, harness, None, tmp_path / "work", None)  # type: ignore[arg-type]
    ahead.prepare()
    tree = tmp_path / "work" / "tree"
    for _ in range(300):  # the tree is made at once; the build waits for start()
        if (tree / "dag.py").is_file():
            break
        threading.Event().wait(0.01)
    assert (tree / "dag.py").read_text() == "good\n" and harness.calls == 0
    assert ahead.start()
    ahead.wait()
    assert harness.calls == 1 and ahead.error == ""
    assert not tree.exists() and len(_worktrees(repo)) == 1  # removed after its run


def test_a_prepared_baseline_never_started_only_removes_its_tree(tmp_path: Path) -> None:
    """Every candidate refused: wait() at the end of the heal builds nothing."""
    repo, event = _repo(tmp_path)
    harness = _Stand(passed=True)
    ahead = BaselineAhead(event, repo, harness, None, tmp_path / "work", None)  # type: ignore[arg-type]
    ahead.prepare()
    ahead.wait()
    assert harness.calls == 0 and not (tmp_path / "work" / "tree").exists()
    assert len(_worktrees(repo)) == 1


def test_a_unit_the_change_added_has_nothing_to_compare_with(tmp_path: Path) -> None:
    # a model new in the change: its baseline selects what does not exist yet; "did not build
    # green" read as if the last good commit were broken
    repo, event = _repo(tmp_path)
    (repo / "new_model.sql").write_text("select 1\n")
    event = event.model_copy(update={"unit_path": "new_model.sql",
                                     "commit": commit_all(repo, "new model")})  # fmt: skip
    harness = _Stand(passed=False)
    harness.go.set()
    baseline, why = BaselineRunner(event, repo, harness, None, tmp_path / "w").first(None)  # type: ignore[arg-type]
    assert baseline is None
    assert "has no new_model.sql (the change added it): nothing to compare with" in why
    assert "did not build green" not in why

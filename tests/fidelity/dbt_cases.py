"""A dbt incident for data-check tests: a breaking commit on the shop project, a candidate
patch verified by the real dbt harness in a worktree, on a copy of the incident snapshot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchit.events.model import DbtInvocation, FailureSource, UniversalFailureEvent
from patchit.fidelity import DataCheck, check_candidate
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree
from tests.conftest import commit_all, git

ORDERS = Path("models") / "marts" / "orders.sql"
AMOUNT = "coalesce(p.amount, 0) as amount,"


def edit(root: Path, old: str, new: str, path: Path = ORDERS) -> None:
    text = (root / path).read_text()
    assert old in text, f"{old!r} not in {path}"
    (root / path).write_text(text.replace(old, new, 1))


def commit_edit(repo: Path, old: str, new: str, message: str) -> str:
    edit(repo, old, new)
    return commit_all(repo, message)


@dataclass
class Incident:
    """One failing commit of `repo`, its snapshot, and where its sandboxes go."""

    repo: Path
    home: Path
    harness: DbtHarness
    baseline_commit: str | None = None
    number: int = 0

    def __post_init__(self) -> None:
        self.event = UniversalFailureEvent(
            source=FailureSource.DBT,
            pipeline_id="shop",
            unit_id="model.shop.orders",
            unit_path=str(ORDERS),
            repo_path=str(self.repo),
            commit=git(self.repo, "rev-parse", "HEAD"),
            dbt=DbtInvocation(
                command="build", args=["build"], project_dir=str(self.repo), cwd=str(self.repo)
            ),
        )
        self.sandbox = self.home / "sandboxes" / "inc"
        self.snapshot = snapshot_database(self.repo / "shop.duckdb", self.sandbox / "snapshot")

    def candidate(self, old: str, new: str) -> tuple[Verification, DataCheck]:
        """Apply one search/replace edit at the failing commit, verify it, data-check it."""
        self.number += 1
        root = create_worktree(
            self.repo, self.event.commit or "HEAD", self.home / "worktrees" / "inc-candidate"
        )
        try:
            edit(root, old, new)
            workspace = Workspace(
                root=root,
                scratch=self.sandbox / f"candidate-{self.number}",
                snapshot=self.snapshot.parent,
            )
            result = self.harness.verify(workspace, self.event)
            assert result.passed, result.output
            check = check_candidate(
                self.event,
                None,
                self.repo,
                self.harness,
                workspace,
                result,
                baseline_commit=self.baseline_commit,
                work=self.sandbox / "baseline",
            )
        finally:
            remove_worktree(self.repo, root)
        return result, check

"""The Python fix-its' candidates really heal the real Airflow failures they were made for.

Every candidate for the zoo DAG is applied, and the DAG runs again under `airflow dags test`:
the patched tasks now succeed while the failures no fix-it touched still fail. The KeyError and
the missing output directory are also verified the way the loop will: AirflowHarness on a git
worktree, broken first (fails), then patched (passes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.base import Workspace
from patchit.patching.apply import apply_edits
from patchit.patching.base import PatchCandidate, ProposalRequest
from patchit.patching.registry import load_strategies
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import commit_all
from tests.evidence.airflow_failures import Zoo, run_zoo, spooled_events

pytestmark = pytest.mark.slow

HEALABLE = {
    "load_order": "rename_key",
    "total_amount": "fix_name",
    "summarise": "fix_name",
    "import_late": "fix_import",
    "export_rows": "fix_call",
    "write_daily": "create_dir",
}


@pytest.fixture(scope="module")
def candidates(zoo: Zoo) -> dict[str, list[PatchCandidate]]:
    """Each failed task's candidates from every registered strategy (dbt ones included), asked
    once for the module: each pass gathers 16 tasks' evidence and runs some 35 git commands
    (about 6 s on a loaded machine), and one test used to ask once per healable task."""
    strategies = load_strategies()
    return {
        task: [
            c
            for s in strategies
            for c in s.propose(ProposalRequest(evidence=zoo.evidence(task))).candidates
        ]
        for task in zoo.events
    }


def test_registered_strategies_propose_exactly_for_the_code_bugs(
    candidates: dict[str, list[PatchCandidate]],
) -> None:
    found = {task: [c.tag for c in cands] for task, cands in candidates.items() if cands}
    assert found == {task: [tag] for task, tag in HEALABLE.items()}


def test_all_candidates_applied_make_the_patched_tasks_pass_in_airflow(
    zoo: Zoo, candidates: dict[str, list[PatchCandidate]], tmp_path: Path
) -> None:
    repo = zoo.copy_repo(tmp_path / "repo")
    for task in HEALABLE:
        (candidate,) = candidates[task]
        apply_edits(repo, candidate.edits)
    commit_all(repo, "patchit: all tier-0 fixes")
    output = run_zoo(repo, zoo.airflow_home, tmp_path / "patchit-home", tmp_path / "out",
                     logical_date="2024-03-02")  # fmt: skip
    still_failing = set(spooled_events(tmp_path / "patchit-home"))
    assert still_failing == set(zoo.events) - set(HEALABLE), output[-4000:]
    assert (tmp_path / "out" / "daily" / "2024-03-02" / "orders.csv").is_file()


def test_harness_verifies_the_key_and_directory_fixes_on_worktrees(
    zoo: Zoo,
    candidates: dict[str, list[PatchCandidate]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # relative: the task writes under its cwd, the worktree (the sandbox lets a candidate write
    # only its worktree and scratch; an absolute path elsewhere is refused, as it should be)
    monkeypatch.setenv("ZOO_OUT", "out")
    roots: list[Path] = []
    try:
        with AirflowHarness(timeout_s=300) as harness:
            for task in ("load_order", "write_daily"):
                event = zoo.events[task]
                for patched in (False, True):
                    dest = worktrees_home() / f"{task}-{patched}"
                    root = create_worktree(zoo.repo, event.commit or "HEAD", dest)
                    roots.append(root)
                    if patched:
                        apply_edits(root, candidates[task][0].edits)
                    workspace = Workspace(root=root, scratch=tmp_path / "scratch" / dest.name)
                    result = harness.verify(workspace, event)
                    assert result.passed is patched, (task, patched, result.output[-3000:])
    finally:
        for root in roots:
            remove_worktree(zoo.repo, root)

"""PythonHarness: real pytest and real interpreters in git worktrees of a small project."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.errors import HarnessError
from patchit.events.model import UniversalFailureEvent
from patchit.harnesses.base import Workspace
from patchit.harnesses.python import PythonHarness, failed_node_ids, parse_unit
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import commit_all
from tests.harnesses.contract import SLOW_TIMEOUT_S, HarnessCase, HarnessContract, MakeCase
from tests.harnesses.python_fixtures import break_settings, make_python_repo, python_event

UnitFor = Callable[[str], str]


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    return make_python_repo(tmp_path / "user-repo", workflow=False)


def case_maker(repo: Path, home: Path, unit_for: UnitFor) -> tuple[MakeCase, list[Path]]:
    roots: list[Path] = []

    def make(kind: str) -> HarnessCase:
        root = create_worktree(repo, "HEAD", worktrees_home() / f"{kind}-{len(roots)}")
        roots.append(root)
        expected = break_settings(root) if kind == "broken" else ""
        return HarnessCase(
            user_repo=repo,
            workspace=Workspace(root=root, scratch=home / "scratch" / f"{kind}-{len(roots)}"),
            event=python_event(repo, unit_for(kind)),
            expected_error=expected,
            changed=["shop/jobs.py"],
        )

    return make, roots


class PythonContract(HarnessContract):
    unit_for: UnitFor

    @pytest.fixture
    def make_case(self, user_repo: Path, _patchit_home: Path) -> Iterator[MakeCase]:
        make, roots = case_maker(user_repo, _patchit_home, type(self).unit_for)
        yield make
        for root in roots:
            remove_worktree(user_repo, root)

    @pytest.fixture
    def harness(self) -> PythonHarness:
        return PythonHarness()

    @pytest.fixture
    def slow_harness(self) -> PythonHarness:
        return PythonHarness(timeout_s=SLOW_TIMEOUT_S)


def _node(kind: str) -> str:
    return "tests/test_jobs.py::" + ("test_nap" if kind == "slow" else "test_write_report")


def _callable(kind: str) -> str:
    return "shop.jobs:" + ("nap" if kind == "slow" else "write_report")


class TestPytestNodes(PythonContract):
    unit_for = staticmethod(_node)

    def test_runs_the_node_in_the_worktree(
        self, harness: PythonHarness, make_case: MakeCase
    ) -> None:
        case = make_case("good")
        result = harness.verify(case.workspace, case.event)
        assert result.passed, result.output
        assert "1 passed" in result.output
        assert result.command.endswith("-m pytest tests/test_jobs.py::test_write_report")
        assert (case.workspace.root / "output" / "report.json").is_file()
        assert not (case.user_repo / "output").exists()
        assert result.isolation.startswith(("bubblewrap", "subprocess"))

    def test_a_deleted_test_fails(self, harness: PythonHarness, make_case: MakeCase) -> None:
        case = make_case("good")
        tests = case.workspace.root / "tests" / "test_jobs.py"
        tests.write_text(tests.read_text().replace("def test_write_report", "def _gone"))
        commit_all(case.workspace.root, "a candidate that deletes the failing test")
        result = harness.verify(case.workspace, case.event)
        assert not result.passed
        assert result.failures == [case.event.unit_id]
        assert "not found" in result.output or "no tests ran" in result.output


class TestCallable(PythonContract):
    unit_for = staticmethod(_callable)

    def test_passes_arguments_and_reports_the_return(
        self, harness: PythonHarness, make_case: MakeCase
    ) -> None:
        case = make_case("good")
        case.event.context["call_kwargs"] = {"out_dir": "elsewhere"}
        result = harness.verify(case.workspace, case.event)
        assert result.passed, result.output
        assert "returned 'elsewhere/report.json'" in result.output
        assert (case.workspace.root / "elsewhere" / "report.json").is_file()


def test_an_import_check_has_file_fidelity(user_repo: Path, _patchit_home: Path) -> None:
    make, roots = case_maker(user_repo, _patchit_home, lambda kind: "shop/jobs.py")
    case = make("good")
    result = PythonHarness().verify(case.workspace, case.event)
    assert result.passed, result.output
    assert result.fidelity == "file"
    assert "imports cleanly" in result.output
    jobs = case.workspace.root / "shop" / "jobs.py"
    jobs.write_text(jobs.read_text() + "\ndef broken(:\n")
    result = PythonHarness().verify(case.workspace, case.event)
    assert not result.passed and "SyntaxError" in result.output
    remove_worktree(user_repo, roots[0])


def test_no_network_in_bubblewrap(user_repo: Path, _patchit_home: Path) -> None:
    """With bubblewrap the run has no network, and the refusal is named as a sandbox limit."""
    make, roots = case_maker(user_repo, _patchit_home, lambda kind: "shop.jobs:fetch")
    case = make("good")
    jobs = case.workspace.root / "shop" / "jobs.py"
    jobs.write_text(
        jobs.read_text()
        + "\n\ndef fetch():\n    import socket\n"
        + "    socket.create_connection(('192.0.2.1', 80), timeout=5)\n"
    )
    harness = PythonHarness(sandbox=SandboxConfig(isolation="bubblewrap"))
    result = harness.verify(case.workspace, case.event)
    assert not result.passed
    assert result.isolation.startswith("bubblewrap (")
    assert "no network" in result.isolation
    assert result.limit_hit == "network", result.output
    remove_worktree(user_repo, roots[0])


def test_parse_unit_forms(tmp_path: Path) -> None:
    repo = tmp_path / "repo"

    def unit(unit_id: str, **context: object) -> tuple[str, list[str]]:
        event = UniversalFailureEvent(
            source="python", pipeline_id="shop", unit_id=unit_id, repo_path=str(repo),
            context=context,
        )  # fmt: skip
        parsed = parse_unit(event)
        return parsed.kind, parsed.targets

    node = "tests/test_a.py::TestA::test_b[1]"
    assert unit(node) == ("pytest", [node])
    assert unit(f"{repo}/tests/test_a.py::test_b") == ("pytest", ["tests/test_a.py::test_b"])
    assert unit("tests/test_a.py") == ("pytest", ["tests/test_a.py"])
    assert unit("x", pytest_node_ids=["t/test_a.py::a", "t/test_b.py"]) == (
        "pytest", ["t/test_a.py::a", "t/test_b.py"],
    )  # fmt: skip
    assert unit("shop.jobs:Loader.run") == ("callable", ["shop.jobs:Loader.run"])
    assert unit("shop/jobs.py") == ("import", ["shop/jobs.py"])
    assert unit("shop.jobs") == ("import", ["shop.jobs"])
    with pytest.raises(HarnessError, match="is not a pytest node id"):
        unit("load the orders")


def test_failed_node_ids_credits_parents() -> None:
    output = (
        "FAILED tests/test_a.py::test_b[2] - AssertionError: 1 != 2\n"
        "ERROR tests/test_c.py::test_d\n"
        "FAILED tests/test_a.py::test_e - KeyError\n"
    )
    assert failed_node_ids(output, ["tests/test_a.py::test_b", "tests/test_x.py::ok"]) == [
        "tests/test_a.py::test_b",
        "tests/test_a.py::test_b[2]",
        "tests/test_c.py::test_d",
        "tests/test_a.py::test_e",
    ]

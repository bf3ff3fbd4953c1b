"""AirflowHarness against real Airflow 3: isolated AIRFLOW_HOMEs, SQLite, the example DAGs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.harnesses.airflow import AirflowHarness
from patchit.harnesses.airflow_home import ensure_template_db, template_db_path
from patchit.harnesses.base import Workspace
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.harnesses.airflow_fixtures import (
    REPORTS_DAG,
    add_slow_dag,
    airflow_event,
    break_import,
    break_with_key_error,
    make_airflow_repo,
)
from tests.harnesses.contract import SLOW_TIMEOUT_S, HarnessCase, HarnessContract, MakeCase

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `airflow db migrate` for the whole session (it costs ~10 s)."""
    home = tmp_path_factory.mktemp("airflow-template-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHIT_HOME", str(home))
        path, _ = ensure_template_db()
    return path


@pytest.fixture
def seeded_home(_patchit_home: Path, template_db: Path) -> Path:
    """This test's PATCHIT_HOME with the session's template DB already in its cache."""
    dest = template_db_path()
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template_db, dest)
    return _patchit_home


@pytest.fixture
def make_case(tmp_path: Path, seeded_home: Path) -> Iterator[MakeCase]:
    repo = make_airflow_repo(tmp_path / "user-repo")
    roots: list[Path] = []

    def make(kind: str) -> HarnessCase:
        root = create_worktree(repo, "HEAD", worktrees_home() / f"{kind}-{len(roots)}")
        roots.append(root)
        dag_id, task_id, dag_file, expected = "shop_reports", "write_report", REPORTS_DAG, ""
        if kind == "broken":
            expected = break_with_key_error(root)
        elif kind == "import_error":
            expected = break_import(root)
            dag_id, task_id = "shop_orders", "publish"
            dag_file = "examples/airflow/dags/shop_orders.py"
        elif kind == "slow":
            add_slow_dag(root)
            dag_id, task_id, dag_file = "slow_dag", "nap", "examples/airflow/dags/slow_dag.py"
        workspace = Workspace(root=root, scratch=seeded_home / "scratch" / f"{kind}-{len(roots)}")
        return HarnessCase(
            user_repo=repo,
            workspace=workspace,
            event=airflow_event(repo, dag_id, task_id, dag_file),
            expected_error=expected,
            protected_files=[repo / REPORTS_DAG],
        )

    yield make
    for root in roots:
        remove_worktree(repo, root)


@pytest.fixture(scope="module")
def warm_harness() -> Iterator[AirflowHarness]:
    """One warm parent for the module, as for one incident's candidates."""
    with AirflowHarness(warm=True) as harness:
        harness.start()
        yield harness


class TestWarmAirflowHarness(HarnessContract):
    @pytest.fixture
    def harness(self, warm_harness: AirflowHarness) -> AirflowHarness:
        return warm_harness

    @pytest.fixture
    def slow_harness(self, warm_harness: AirflowHarness) -> Iterator[AirflowHarness]:
        # The same warm parent with a short limit: a timeout kills the child, not the parent.
        saved = warm_harness.timeout_s
        warm_harness.timeout_s = SLOW_TIMEOUT_S
        yield warm_harness
        warm_harness.timeout_s = saved

    def test_honours_the_timeout(self, slow_harness: AirflowHarness, make_case: MakeCase) -> None:
        pid = slow_harness.parent_pid
        super().test_honours_the_timeout(slow_harness, make_case)
        assert slow_harness.parent_pid == pid  # the parent survives to serve the next one

    def test_runs_upstream_tasks_and_writes_only_in_the_sandbox(
        self, harness: AirflowHarness, make_case: MakeCase, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        fake_home = tmp_path / "home"
        fake_home.mkdir()
        monkeypatch.setenv("HOME", str(fake_home))
        real_airflow = Path(os.path.expanduser("~root")) / "airflow"
        before = sorted(p.name for p in real_airflow.iterdir()) if real_airflow.is_dir() else None
        case = make_case("good")
        result = harness.verify(case.workspace, case.event)
        assert result.passed, result.output
        # write_report pulls collect_rows' XCom: it ran first, and the file went to the worktree.
        assert '"collect_rows": "success"' in result.output
        written = list((case.workspace.root / "examples" / "airflow" / "output").rglob("*.csv"))
        assert [p.name for p in written] == ["orders_2024-01-01_EUR.csv"]
        assert not (case.user_repo / "examples" / "airflow" / "output").exists()
        assert list(fake_home.iterdir()) == []
        after = sorted(p.name for p in real_airflow.iterdir()) if real_airflow.is_dir() else None
        assert after == before

    def test_detects_an_import_error(self, harness: AirflowHarness, make_case: MakeCase) -> None:
        case = make_case("import_error")
        result = harness.verify(case.workspace, case.event)
        assert not result.passed
        assert result.failures == ["publish"]
        assert "DAG import failed" in result.output
        assert case.expected_error in result.output
        assert "ImportError" in result.output

    def test_reuses_the_template_db(
        self, harness: AirflowHarness, make_case: MakeCase, seeded_home: Path
    ) -> None:
        template_db_path().unlink()  # this home starts without one: the first verify migrates
        first_case, second_case = make_case("good"), make_case("good")
        first = harness.verify(first_case.workspace, first_case.event)
        first_timings = dict(harness.last_timings)
        assert first.passed, first.output
        assert first_timings["migrate_ms"] > 0
        stamp = template_db_path().stat().st_mtime_ns
        second = harness.verify(second_case.workspace, second_case.event)
        assert second.passed, second.output
        assert harness.last_timings["migrate_ms"] == 0
        assert template_db_path().stat().st_mtime_ns == stamp
        assert second.duration_ms < first.duration_ms


class TestFreshAirflowHarness:
    """warm=False: one `python -m patchit.harnesses.airflow_runner` per candidate."""

    def test_judges_like_the_warm_harness(self, make_case: MakeCase) -> None:
        case = make_case("broken")
        with AirflowHarness(warm=False) as harness:
            result = harness.verify(case.workspace, case.event)
            assert harness.parent_pid is None
        assert not result.passed
        assert case.expected_error in result.output
        assert result.failures == ["write_report"]

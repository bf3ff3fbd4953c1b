"""AirflowHarness against real Airflow 3: isolated AIRFLOW_HOMEs, SQLite, the example DAGs."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.config import SandboxConfig
from patchit.harnesses.airflow import home as airflow_home
from patchit.harnesses.airflow.harness import AirflowHarness
from patchit.harnesses.airflow.home import ensure_template_db, template_db_path
from patchit.harnesses.base import Verification, Workspace
from patchit.sandbox.isolation import bubblewrap_problem
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import PER_HOME_TEMPLATE_DB
from tests.harnesses.airflow_fixtures import (
    ESCAPE_DAG_FILE,
    REPORTS_DAG,
    add_escape_dag,
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
    """The run's one migrated template (tests/conftest.py; `airflow db migrate` costs ~10 s)."""
    home = tmp_path_factory.mktemp("airflow-template-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHIT_HOME", str(home))
        path, _ = ensure_template_db()
    return path


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("patchit-home")


@pytest.fixture(autouse=True)
def _patchit_home(module_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One PATCHIT_HOME for the module, as for one patchit process: the warm parent's sandbox
    (its worktrees, sandboxes and cache writable) then serves every test."""
    monkeypatch.setenv("PATCHIT_HOME", str(module_home))
    return module_home


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
    incident = tmp_path.name  # unique in the shared home
    roots: list[Path] = []

    def make(kind: str) -> HarnessCase:
        name = f"{incident}-{kind}-{len(roots)}"
        root = create_worktree(repo, "HEAD", worktrees_home() / name)
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
        scratch = seeded_home / "sandboxes" / incident / f"{kind}-{len(roots)}"
        workspace = Workspace(root=root, scratch=scratch)
        return HarnessCase(
            user_repo=repo,
            workspace=workspace,
            event=airflow_event(repo, dag_id, task_id, dag_file),
            expected_error=expected,
            protected_files=[repo / REPORTS_DAG],
            changed=[dag_file],
            screened_out=kind == "import_error",  # the DAG file does not import: sure to fail
        )

    yield make
    for root in roots:
        remove_worktree(repo, root)


@pytest.fixture(scope="module")
def warm_harness(module_home: Path) -> Iterator[AirflowHarness]:
    """One warm parent for the module, as for one incident's candidates."""
    with AirflowHarness(warm=True) as harness, pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHIT_HOME", str(module_home))
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

    def test_screen_imports_the_dag_file_in_a_fork_of_the_warm_parent(
        self, harness: AirflowHarness, make_case: MakeCase
    ) -> None:
        case = make_case("import_error")
        pid = harness.parent_pid
        screening = harness.screen(case.workspace, case.event, case.changed)
        assert not screening.passed
        assert "imported in a fork of the warm Airflow parent" in screening.check
        assert case.expected_error in screening.output and "ImportError" in screening.reason
        assert screening.reason.startswith("examples/airflow/dags/shop_orders.py: ")
        assert harness.parent_pid == pid  # served by the running parent
        # a broken DAG file's own event: importing is verify's whole test, not the screen's
        own = case.event.model_copy(update={"status": "import_error"})
        left = harness.screen(case.workspace, own, case.changed)
        assert left.passed and "left to verify" in left.skipped[-1]

    def test_screen_compiles_before_anything_is_imported(
        self, harness: AirflowHarness, make_case: MakeCase
    ) -> None:
        case = make_case("good")
        dag = case.workspace.root / REPORTS_DAG
        dag.write_text(dag.read_text().replace("def write_report(", "def write_report(("))
        screening = harness.screen(case.workspace, case.event, case.changed)
        assert not screening.passed
        assert screening.check == "compile() of the changed .py files"
        assert screening.reason.startswith("SyntaxError")
        assert not (case.workspace.scratch / "screen").exists()  # no fork, no Airflow home

    def test_a_second_candidate_changing_a_helper_module_is_seen(
        self, harness: AirflowHarness, make_case: MakeCase
    ) -> None:
        """The DAG imports `shop_lib.transforms`; three candidates in a row on one warm parent
        each change that helper, and each verdict follows its own copy (a module left over
        from the candidate before would be a false verification)."""
        helper = "examples/airflow/dags/shop_lib/transforms.py"
        marker = "    totals: dict[str, int] = {}\n"
        pids, outputs = set(), []
        for raised in ("helper of candidate 1", None, "helper of candidate 3"):
            case = make_case("good")
            path = case.workspace.root / helper
            if raised:
                text = path.read_text()
                path.write_text(text.replace(marker, f"    raise ValueError({raised!r})\n{marker}"))
            event = airflow_event(case.user_repo, "shop_orders", "summarise",
                                  "examples/airflow/dags/shop_orders.py")  # fmt: skip
            result = harness.verify(case.workspace, event)
            assert result.passed is (raised is None), result.output
            outputs.append(result.output)
            pids.add(harness.parent_pid)
        assert "ValueError: helper of candidate 1" in outputs[0]
        assert "helper of candidate" not in outputs[1]
        assert "helper of candidate 3" in outputs[2] and "candidate 1" not in outputs[2]
        assert len(pids) == 1  # all three forks of one warm parent

    def test_the_parent_warms_up_without_leaving_its_dag_to_a_candidate(
        self, harness: AirflowHarness, make_case: MakeCase
    ) -> None:
        """The parent ran its own warm-up DAG before forking (one thread left, as a fork
        needs); a candidate's run sees none of that DAG's modules."""
        case = make_case("good")
        code = 'import sys\nassert not [m for m in sys.modules if "patchit_warm_up" in m]'
        add_escape_dag(case.workspace.root, code)
        event = airflow_event(case.user_repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        result = harness.verify(case.workspace, event)
        assert result.passed, result.output
        assert harness._parent is not None
        warm = harness._parent.wait_ready(0)["warm"]
        assert warm is not None, harness._parent.stderr_tail()  # None: it restarted cold
        assert warm["passed"] is True and warm["threads"] == 1, warm
        assert warm["api_shut_down"] is True  # by the parent itself, not left to collection

    def test_reuses_the_template_db(
        self,
        harness: AirflowHarness,
        make_case: MakeCase,
        seeded_home: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # patchit's own per-home cache, not the run-wide template tests/conftest.py gives it
        monkeypatch.setattr(airflow_home, "template_db_path", PER_HOME_TEMPLATE_DB)
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
    """warm=False: one `python -m patchit.harnesses.airflow.runner` per candidate."""

    def test_judges_like_the_warm_harness(self, make_case: MakeCase) -> None:
        case = make_case("broken")
        with AirflowHarness(warm=False) as harness:
            result = harness.verify(case.workspace, case.event)
            assert harness.parent_pid is None
        assert not result.passed
        assert case.expected_error in result.output
        assert result.failures == ["write_report"]


@pytest.fixture
def outside() -> Iterator[Path]:
    """A dir outside /tmp (which the sandbox hides entirely) that a task may not write."""
    path = Path(tempfile.mkdtemp(prefix="patchit-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path)


class TestSandboxedAirflowTask:
    """A patched task that tries to escape is stopped, and the attempt says which limit."""

    @pytest.fixture(autouse=True)
    def _bwrap(self) -> None:
        problem = bubblewrap_problem()
        assert problem is None, f"bubblewrap is required ({problem}); CI installs it"

    @staticmethod
    def run_escape(harness: AirflowHarness, make_case: MakeCase, code: str) -> Verification:
        case = make_case("good")
        add_escape_dag(case.workspace.root, code)
        event = airflow_event(case.user_repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        result = harness.verify(case.workspace, event)
        assert not result.passed
        assert result.isolation.startswith("bubblewrap ("), result.isolation
        assert "no network" in result.isolation
        return result

    def test_a_write_outside_the_worktree(
        self, warm_harness: AirflowHarness, make_case: MakeCase, outside: Path
    ) -> None:
        code = f"open({str(outside / 'escape.txt')!r}, 'w').write('escaped')"
        result = self.run_escape(warm_harness, make_case, code)
        assert result.limit_hit == "write", result.output
        assert "Read-only file system" in result.output
        assert list(outside.iterdir()) == []

    def test_a_socket(
        self, warm_harness: AirflowHarness, make_case: MakeCase,
        listener: tuple[int, list[bytes]],
    ) -> None:  # fmt: skip
        port, received = listener
        code = f"""
import socket
socket.create_connection(("127.0.0.1", {port}), timeout=5).sendall(b"escaped")
"""
        result = self.run_escape(warm_harness, make_case, code)
        assert result.limit_hit == "network", result.output
        assert received == []

    def test_a_runaway(self, warm_harness: AirflowHarness, make_case: MakeCase) -> None:
        saved, warm_harness.timeout_s = warm_harness.timeout_s, SLOW_TIMEOUT_S
        started = time.monotonic()
        try:
            result = self.run_escape(warm_harness, make_case, "while True:\n    pass")
        finally:
            warm_harness.timeout_s = saved
        assert result.limit_hit == "time"
        assert time.monotonic() - started < SLOW_TIMEOUT_S + 20

    def test_memory_over_the_limit(self, warm_harness: AirflowHarness, make_case: MakeCase) -> None:
        result = self.run_escape(warm_harness, make_case, "blob = bytearray(8 * 1024 ** 3)")
        assert result.limit_hit == "memory", result.output
        assert "MemoryError" in result.output

    def test_the_network_when_the_config_allows_it(
        self, make_case: MakeCase, listener: tuple[int, list[bytes]]
    ) -> None:
        port, received = listener
        case = make_case("good")
        add_escape_dag(
            case.workspace.root,
            f"import socket\nsocket.create_connection(('127.0.0.1', {port})).sendall(b'hi')",
        )
        event = airflow_event(case.user_repo, "escape_dag", "escape", ESCAPE_DAG_FILE)
        with AirflowHarness(warm=False, sandbox=SandboxConfig(network=True)) as harness:
            result = harness.verify(case.workspace, event)
        assert result.passed, result.output
        assert "network allowed" in result.isolation
        assert received == [b"hi"]

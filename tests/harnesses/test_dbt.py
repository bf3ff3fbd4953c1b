"""DbtHarness against real dbt-duckdb, warm worker and fresh subprocess alike."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.harnesses.base import Verification, Workspace
from patchit.harnesses.dbt.harness import DbtHarness
from patchit.harnesses.dbt.protocol import RUN_NODES_FILE, WARM_UP_PARSE
from patchit.harnesses.dbt.tuning_schemas import SCHEMAS_FILE
from patchit.sandbox.isolation import shared_cache
from patchit.sandbox.snapshot import snapshot_database
from patchit.sandbox.worktree import create_worktree, remove_worktree, worktrees_home
from tests.conftest import commit_all, git
from tests.harnesses.contract import SLOW_TIMEOUT_S, HarnessCase, HarnessContract, MakeCase

# 4e12 rows: DuckDB would need hours, so only the harness's limit can end it.
SLOW_SQL = (
    "select sum(a.range * b.range) % 7 as n from range(2000000) a cross join range(2000000) b"
)


def shop_event(repo: Path, unit_id: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source="dbt",
        pipeline_id="shop",
        unit_id=unit_id,
        repo_path=str(repo),
        commit=git(repo, "rev-parse", "HEAD"),
        dbt=DbtInvocation(command="build", args=["build"], project_dir=str(repo), cwd=str(repo)),
    )


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("patchit-home")


@pytest.fixture(autouse=True)
def _patchit_home(module_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One PATCHIT_HOME for the module, as for one patchit process: the warm worker's sandbox
    (its worktrees, sandboxes and cache writable) then serves every test."""
    monkeypatch.setenv("PATCHIT_HOME", str(module_home))
    return module_home


@pytest.fixture
def make_case(shop_repo: Path, _patchit_home: Path, tmp_path: Path) -> Iterator[MakeCase]:
    """Cases in worktrees of the `shop_repo`, sharing one incident snapshot of its DB; laid
    out as the loop lays them out (scratch dirs under `$PATCHIT_HOME/sandboxes`)."""
    incident = tmp_path.name  # unique in the shared home
    snapshot = snapshot_database(shop_repo / "shop.duckdb", _patchit_home / "snapshots" / incident)
    roots: list[Path] = []

    def make(kind: str) -> HarnessCase:
        name = f"{incident}-{kind}-{len(roots)}"
        root = create_worktree(shop_repo, "HEAD", worktrees_home() / name)
        roots.append(root)
        unit_id, expected = "model.shop.orders", ""
        if kind == "broken":
            orders = root / "models" / "marts" / "orders.sql"
            orders.write_text(orders.read_text().replace("o.status,", "o.statuss as status,"))
            commit_all(root, "orders: typo")
            expected = "Binder Error"
        elif kind == "slow":
            (root / "models" / "marts" / "slow.sql").write_text(SLOW_SQL + "\n")
            commit_all(root, "a very slow model")
            unit_id = "model.shop.slow"
        workspace = Workspace(
            root=root,
            scratch=_patchit_home / "sandboxes" / incident / f"{kind}-{len(roots)}",
            snapshot=snapshot.parent,
        )
        event = shop_event(shop_repo, unit_id)
        # the failing run's manifest: the screen resolves refs with it
        event.artifacts["manifest"] = str(shop_repo / "target" / "manifest.json")
        return HarnessCase(
            user_repo=shop_repo,
            workspace=workspace,
            event=event,
            expected_error=expected,
            protected_files=[shop_repo / "shop.duckdb"],
            changed=["models/marts/orders.sql"],
            screened_out=kind == "broken",  # `o.statuss` does not bind: DuckDB's binder knows
        )

    yield make
    for root in roots:
        remove_worktree(shop_repo, root)


@pytest.fixture(scope="module")
def warm_harness() -> Iterator[DbtHarness]:
    """One warm harness for the module: its worker serves every test, as in one incident."""
    with DbtHarness(warm=True) as harness:
        yield harness


def test_the_screen_binds_without_dbt_and_keeps_one_clone_per_incident(
    make_case: MakeCase,
) -> None:
    with DbtHarness(warm=True) as harness:
        broken = make_case("broken")
        screening = harness.screen(broken.workspace, broken.event, broken.changed)
        assert not screening.passed
        assert screening.reason.startswith("models/marts/orders.sql: Binder Error")
        assert '"statuss"' in screening.reason
        assert harness.worker_pid is None  # no dbt process started for it
        incident = harness.screener._prepared
        good = make_case("good")  # the same incident's next candidate
        assert harness.screen(good.workspace, good.event, good.changed).passed
        assert harness.screener._prepared is incident
    assert harness.screener._prepared is None  # close() dropped the clone


@pytest.mark.slow  # spawns a dbt worker (killed before it has imported dbt)
def test_close_kills_a_worker_still_starting_without_waiting_for_it() -> None:
    # the loop warms the worker up while evidence is gathered; when no candidate reaches
    # verify, closing must not wait the seconds the worker spends importing dbt
    harness = DbtHarness(timeout_s=300, warm=True)
    thread = harness.start_in_background()
    pid = harness.worker_pid
    assert pid is not None
    deadline = time.monotonic() + 10
    while not harness._lock.locked() and time.monotonic() < deadline:
        time.sleep(0.01)  # the start thread waits for the worker's ready line, as in the loop
    started = time.monotonic()
    harness.close()
    elapsed = time.monotonic() - started
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert harness.worker_pid is None
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)
    assert elapsed < 1.0  # importing dbt takes seconds; the kill, milliseconds


class TestWarmDbtHarness(HarnessContract):
    @pytest.fixture
    def harness(self, warm_harness: DbtHarness) -> DbtHarness:
        return warm_harness

    @pytest.fixture
    def slow_harness(self) -> Iterator[DbtHarness]:
        with DbtHarness(timeout_s=SLOW_TIMEOUT_S, warm=True) as harness:
            harness.start()  # the timeout covers the run, not dbt's import
            yield harness

    def test_reuses_one_worker_and_replaces_a_dead_one(
        self, harness: DbtHarness, make_case: MakeCase, shop_repo: Path
    ) -> None:
        good = make_case("good")
        # The failing run's manifest and parse: what the candidate changed (nothing here) is
        # selected by name, without dbt's state comparison (test_what_a_candidate_changed...)
        good.event.artifacts["manifest"] = str(shop_repo / "target" / "manifest.json")
        first = harness.verify(good.workspace, good.event)
        assert first.passed, first.output
        assert "state:modified+" not in first.command and "--state" not in first.command
        pid = harness.worker_pid
        assert pid is not None

        broken = make_case("broken")
        second = harness.verify(broken.workspace, broken.event)
        assert not second.passed
        assert '"statuss"' in second.output
        assert harness.worker_pid == pid

        os.kill(pid, signal.SIGKILL)  # a worker that died between calls is replaced
        third = harness.verify(make_case("good").workspace, good.event)
        assert third.passed, third.output
        assert harness.worker_pid not in (None, pid)

    def test_a_worker_started_in_the_background_outlives_its_thread(
        self, make_case: MakeCase
    ) -> None:
        # bwrap's --die-with-parent follows the spawning *thread*: a worker spawned by the
        # short-lived start thread was SIGKILLed under the first verify
        with DbtHarness(timeout_s=300, warm=True) as harness:
            harness.start_in_background().join()
            pid = harness.worker_pid
            assert pid is not None
            good = make_case("good")
            result = harness.verify(good.workspace, good.event)
            assert result.passed, result.output
            assert harness.worker_pid == pid

    def test_honours_the_timeout(self, slow_harness: DbtHarness, make_case: MakeCase) -> None:
        super().test_honours_the_timeout(slow_harness, make_case)
        assert slow_harness.worker_pid is None  # killed; the next verify starts another

    def test_two_verifies_at_once_share_the_worker_and_keep_their_verdicts(
        self, harness: DbtHarness, make_case: MakeCase
    ) -> None:
        # the data check's baseline runs beside a candidate's verification
        cases = {"good": make_case("good"), "broken": make_case("broken")}
        results: dict[str, Verification] = {}

        def run(kind: str) -> None:
            results[kind] = harness.verify(cases[kind].workspace, cases[kind].event)

        harness.start()
        pid = harness.worker_pid
        threads = [threading.Thread(target=run, args=(kind,)) for kind in cases]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert results["good"].passed, results["good"].output
        assert not results["broken"].passed and '"statuss"' in results["broken"].output
        assert harness.worker_pid == pid

    def test_what_a_candidate_changed_is_selected_by_name_without_dbts_state_comparison(
        self, harness: DbtHarness, make_case: MakeCase
    ) -> None:
        # the failing run's parse and manifest are the shop's own (dbt wrote both)
        case = make_case("good")
        root = case.workspace.root
        staging = root / "models" / "staging" / "stg_customers.sql"  # not below orders
        staging.write_text(staging.read_text() + "\n-- a candidate's second edit\n")
        named = harness.verify(case.workspace, case.event)
        assert named.passed, named.output
        assert "stg_customers+" in named.command
        assert "state:modified" not in named.command and "--state" not in named.command
        assert "model.shop.stg_customers" not in named.failures
        target = case.workspace.scratch / "target"
        ran = json.loads((target / "run_results.json").read_text())
        assert "model.shop.stg_customers" in {r["unique_id"] for r in ran["results"]}
        # the worker writes the run's own nodes instead of dbt's whole manifest and graph
        assert not (target / "manifest.json").exists()
        assert not (target / "graph.gpickle").exists()
        nodes = json.loads((target / RUN_NODES_FILE).read_text())["nodes"]
        assert nodes["model.shop.stg_customers"]["schema"] == "main"
        assert set(nodes) == {r["unique_id"] for r in ran["results"]}

        schema = root / "models" / "marts" / "schema.yml"  # only dbt can judge a YAML edit
        schema.write_text(schema.read_text() + "\n")
        schema.write_text(schema.read_text().replace("version: 2", "version: 2\n# edited"))
        judged = harness.verify(case.workspace, case.event)
        assert judged.passed, judged.output
        assert "state:modified+" in judged.command and "--state" in judged.command

    @pytest.mark.slow  # starts two dbt workers
    def test_a_worker_leaves_its_warm_up_parse_for_the_next_one(self, harness: DbtHarness) -> None:
        harness.start()
        cached = shared_cache() / WARM_UP_PARSE
        schemas = shared_cache() / SCHEMAS_FILE
        assert cached.is_file()  # the next worker's warm-up starts from it
        assert schemas.is_file()  # and the next worker and every fresh process from these
        made = json.loads(schemas.read_text())["schemas"]
        assert "dbt.artifacts.resources.v1.model.ModelConfig" in made
        assert "dbt.artifacts.resources.v1.seed.SeedConfig" in made  # made, not only asked
        before = cached.stat().st_mtime_ns, schemas.stat().st_mtime_ns
        with DbtHarness(warm=True) as another:
            another.start()
        after = cached.stat().st_mtime_ns, schemas.stat().st_mtime_ns
        assert after[0] > before[0] and after[1] > before[1]  # started from them, left its own


class TestFreshDbtHarness(HarnessContract):
    @pytest.fixture
    def harness(self) -> Iterator[DbtHarness]:
        with DbtHarness(warm=False) as harness:
            yield harness

    @pytest.fixture
    def slow_harness(self) -> Iterator[DbtHarness]:
        with DbtHarness(timeout_s=SLOW_TIMEOUT_S, warm=False) as harness:
            yield harness

    def test_has_no_worker(self, harness: DbtHarness) -> None:
        assert harness.worker_pid is None

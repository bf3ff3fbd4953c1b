"""Shared fixtures: real git repos holding the example dbt project, built once per run and
shared by pytest-xdist workers; the `slow` marking; and the fast tier's guard.

Tiers: `make test` runs everything; `make test-fast` runs `-m "not slow"`. A test is slow when
it starts dbt, Airflow, Postgres or docker, in a child process or in-process. Tests that use
`built_shop`, `shop_repo`, `zoo` or `pg` (directly or through another fixture) are marked slow
here; others say so with `pytestmark = pytest.mark.slow` or `@pytest.mark.slow`. In the fast tier
(`-m "not slow"` or PATCHIT_FAST_TIER=1) a test that starts one of those processes or imports
`dbt`/`airflow` fails, so a slow test cannot slip into it unmarked.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from patchit.examples import SHOP
from patchit.harnesses.airflow import home as airflow_home
from tests import fast_tier as fast_tier_checks

if TYPE_CHECKING:
    from patchit.events.model import UniversalFailureEvent
    from tests.evidence.airflow_failures import Zoo
    from tests.pg_cluster import PgCluster
    from tests.sf_server import SfServer

# no phoning home from dbt runs in tests (these machines have no internet)
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = SHOP
BIN = Path(sys.executable).parent

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Dana Engineer",
    "GIT_AUTHOR_EMAIL": "dana@example.com",
    "GIT_COMMITTER_NAME": "Dana Engineer",
    "GIT_COMMITTER_EMAIL": "dana@example.com",
}


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return out.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def committed_repo(repo: Path, files: dict[str, str], message: str) -> str:
    """A new git repository at `repo` holding `files` (path -> text), committed; its commit."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    return commit_all(repo, message)


def run_dbt(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dbt"), *args, "--profiles-dir", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
    )


def user_dbt_events(
    repo: Path, cli_args: list[str], project: Path | None = None
) -> tuple[int, list[UniversalFailureEvent]]:
    """Run `dbt <cli_args>` through patchit's intake as the user would: from `project` (default
    the repo root, where the example profile's relative DuckDB path points), with the failure
    events recorded there too. Returns dbt's exit code and the events."""
    import contextlib

    from patchit.intake.dbt import events_from_run
    from patchit.intake.dbt_run import build_dbt_args, now_utc
    from patchit.intake.dbt_run import run_dbt as intake_run_dbt
    from patchit.sandbox.git import head_commit

    project = project or repo
    args = build_dbt_args(cli_args, project, str(project), None)
    started = now_utc()
    with contextlib.chdir(project):
        code, record = intake_run_dbt(args, repo.parent / "runs")
        events = events_from_run(record, args, project, repo, head_commit(repo), started)
    return code, events


# --- tiers ---------------------------------------------------------------------------------

# Using any of these (directly or through another fixture) makes a test slow: they build dbt,
# run Airflow, or start a PostgreSQL cluster.
SLOW_FIXTURES = frozenset({"built_shop", "shop_repo", "zoo", "habits", "pg"})

SITECUSTOMIZE = """# written by tests/conftest.py for the fast tier
import importlib.util

spec = importlib.util.spec_from_file_location("_patchit_fast_tier", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.watch_this_process()
"""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """`make fuzz`: how many inputs each parser got, and how many went wrong."""
    fuzzing = sys.modules.get("tests.fuzzing")
    if fuzzing is not None and fuzzing.TALLIES:
        terminalreporter.section("fuzz: inputs per parser")
        for line in fuzzing.summary_lines():
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        heavy_files_first(items)


# --- balance across pytest-xdist workers ------------------------------------------------------

# `make test` runs whole files per worker (`--dist loadfile`) and hands them out in collection
# order (`--no-loadscope-reorder`): xdist's own order, most tests first, sent these files of one
# to four long tests last, two of them queued on one worker while the others idled, and that
# worker set the suite's wall time. So the longest files start first, longest first (the 40
# longest of a measured run: each file's summed test times from `--junitxml`, on the 2-core CI
# machine); the rest keep their order. A stale list only costs time: re-measure and re-rank.
# Re-ranked from the slowest tests of the last clean-clone `make test` (2026-11-28, 37 min):
# the perf benches' fixtures, the Airflow heal-DAG deployment and the fork parent's cold
# restart (100-150 s each) had started last or mid-run.
HEAVY_FILES = (
    "tests/patching/test_python_verify.py",
    "tests/cli/test_dbt_wrapper.py",
    "tests/cli/test_demo.py",
    "tests/test_loop_llm.py",
    "tests/bench/test_corpus_postgres.py",
    "tests/integrations/test_airflow_real.py",
    "tests/test_planted_secrets_real.py",
    "tests/bench/test_fault.py",
    "tests/bench/test_corpus_quick.py",
    "tests/test_loop.py",
    "tests/bench/test_corpus_quick_airflow.py",
    "tests/test_loop_runtime.py",
    "tests/delivery/test_e2e_airflow.py",
    "tests/test_loop_airflow3.py",
    "tests/bench/test_perf_airflow.py",
    "tests/delivery/test_e2e_airflow_heal.py",
    "tests/bench/test_perf.py",
    "tests/bench/test_perf_heal.py",
    "tests/harnesses/test_airflow_fork.py",
    "tests/patching/test_airflow3.py",
    "tests/test_postgres.py",
    "tests/cli/test_unprepared_project.py",
    "tests/delivery/test_e2e_dbt.py",
    "tests/harnesses/test_airflow.py",
    "tests/patching/test_columns.py",
    "tests/patching/test_refs.py",
    "tests/integrations/test_airflow_heal_dag.py",
    "tests/harnesses/test_dbt_partial_parse.py",
    "tests/cli/test_dropin.py",
    "tests/harnesses/test_dbt.py",
    "tests/test_loop_fidelity.py",
    "tests/cli/test_bad_input.py",
    "tests/test_loop_columns.py",
    "tests/cli/test_inspect.py",
    "tests/patching/test_message.py",
    "tests/test_loop_limits.py",
    "tests/classify/test_classify_data_changes.py",
    "tests/test_worker.py",
    "tests/harnesses/test_escapes.py",
    "tests/patching/test_yaml_props.py",
    "tests/state/test_race_pg.py",
    "tests/fidelity/test_dbt_check.py",
    "tests/fidelity/test_airflow_check.py",
)


def heavy_files_first(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: HEAVY_FILES' tests first, in its order; a file's own tests
    keep their order, and so do all other files'."""
    rank = {path: number for number, path in enumerate(HEAVY_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def fast_tier(config: pytest.Config) -> bool:
    markexpr = "".join(str(config.getoption("markexpr", "") or "").split())
    return os.environ.get("PATCHIT_FAST_TIER") == "1" or markexpr == "notslow"


class SlowInFastTier(Exception):
    """A test in the fast tier started dbt, Airflow, Postgres or docker."""


_started: list[str] = []


def _refuse(program: str) -> None:
    _started.append(f"started {program!r}")  # remembered in case the code swallows the error
    raise SlowInFastTier(
        f"this test started {program!r}: mark it slow (`pytest.mark.slow`) or use a fake; "
        "the fast tier starts no dbt, Airflow, Postgres, docker or Chromium process"
    )


@pytest.fixture(scope="session", autouse=True)
def _fast_tier_watch(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path | None]:
    """In the fast tier: starting a slow program raises here, and Python children log what they
    start or import (a `sitecustomize` on PYTHONPATH). Session-wide, so that session fixtures
    are watched too. Yields the children's log."""
    if not fast_tier(request.config):
        yield None
        return
    guard = tmp_path_factory.mktemp("fast-tier-guard")
    (guard / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(path=str(Path(__file__).with_name("fast_tier.py")))
    )
    log = guard / "started.log"
    python_path = [str(guard), *filter(None, [os.environ.get("PYTHONPATH")])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess.Popen, "__init__", fast_tier_checks.guard_popen(_refuse))
        mp.setenv("PYTHONPATH", os.pathsep.join(python_path))
        mp.setenv(fast_tier_checks.LOG_ENV, str(log))
        yield log


@pytest.fixture(autouse=True)
def _fast_tier_guard(_fast_tier_watch: Path | None) -> Iterator[None]:
    """In the fast tier, fail a test that started dbt, Airflow, Postgres or docker (itself or
    in a child) or imported dbt or Airflow."""
    if _fast_tier_watch is None:
        yield
        return
    _started.clear()
    _fast_tier_watch.write_text("")
    before = fast_tier_checks.slow_modules()
    yield
    found = [*_started, *_fast_tier_watch.read_text().splitlines()]
    found += [f"imported {m!r}" for m in sorted(fast_tier_checks.slow_modules() - before)[:3]]
    if found:
        pytest.fail(
            f"slow test in the fast tier: {'; '.join(found)}; mark it `pytest.mark.slow`",
            pytrace=False,
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """A test module that imports dbt or Airflow at collection would slow every fast run and
    blind the per-test import check: import them inside the test or fixture instead."""
    if fast_tier(session.config) and (loaded := sorted(fast_tier_checks.slow_modules())):
        raise pytest.UsageError(
            f"the fast tier imported {', '.join(loaded[:5])} while collecting tests: move the "
            "import into the (slow) test or fixture that needs it"
        )


# --- shared builds ---------------------------------------------------------------------------


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The run's directory shared by all pytest-xdist workers: the parent of each worker's
    basetemp (without xdist, the basetemp)."""
    base = factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(exist_ok=True)
    return root


def shared_build(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """`build(dest)` once per test run, whatever the number of pytest-xdist workers: the first
    worker builds under a file lock in the run's root (the parent of each worker's basetemp)
    and the others wait for it and reuse the result. Without xdist it is the basetemp."""
    root = shared_root(factory)
    dest, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(dest, ignore_errors=True)  # a failed build (another worker's error)
            dest.mkdir()
            build(dest)
            done.touch()
    return dest


# patchit's own function, before `_airflow_template_per_run` replaces it: a test about the
# per-home cache itself (tests/harnesses/test_airflow.py) puts it back.
PER_HOME_TEMPLATE_DB = airflow_home.template_db_path


@pytest.fixture(scope="session", autouse=True)
def _airflow_template_per_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One migrated Airflow metadata DB for the whole run, not one per test's PATCHIT_HOME.

    patchit keeps its template (`airflow db migrate`, some 4 CPU-s and 10 s on a loaded
    machine) in `$PATCHIT_HOME/cache`, and every test has a fresh home: some thirty tests
    each migrated their own. In this process the template's path is the run's shared dir
    instead; patchit's `ensure_template_db` still makes it on first use, under its own file
    lock, so the pytest-xdist workers share one. Child patchit processes read their home's
    cache: `seed_airflow_template` links the run's template there."""
    shared = shared_root(tmp_path_factory) / "airflow-db"

    def run_template_db() -> Path:
        return shared / f"{airflow_home.airflow_version()}.sqlite3"

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(airflow_home, "template_db_path", run_template_db)
        yield


def airflow_template_db() -> Path:
    """The run's migrated Airflow metadata DB, made on first use: copy it, never change it."""
    return airflow_home.ensure_template_db()[0]


def seed_airflow_template(home: Path) -> Path:
    """Give the patchit home `home` (of a child patchit process) the run's migrated template
    in its cache, as a link, so that its first Airflow verify does not migrate one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHIT_HOME", str(home))
        cached = PER_HOME_TEMPLATE_DB()  # where the child looks
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.unlink(missing_ok=True)
    cached.symlink_to(airflow_template_db())
    return home


@pytest.fixture(autouse=True)
def _patchit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "patchit-home"
    monkeypatch.setenv("PATCHIT_HOME", str(home))
    monkeypatch.delenv("PATCHIT_STATE_URL", raising=False)  # SQLite unless a test asks
    # the Airflow callback holds, per process, events no store could take and spools them
    # before its next one: a test that left one held (an unwritable home) must not hand it
    # to the next test's spool
    keep = sys.modules.get("patchit.integrations.airflow_keep")
    if keep is not None:
        keep._held.clear()
    return home


def build_shop(root: Path) -> None:
    dest = root / "shop"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    res = run_dbt(dest, "build")
    assert res.returncode == 0, res.stdout[-3000:]
    shutil.rmtree(dest / "logs", ignore_errors=True)


@pytest.fixture(scope="session")
def built_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project after one green `dbt build` (database included), built once per run
    and shared by all workers: read it or copy it, never change it."""
    return shared_build(tmp_path_factory, "built", build_shop) / "shop"


@pytest.fixture
def shop_repo(tmp_path: Path, built_shop: Path) -> Iterator[Path]:
    """A git repo (the dbt project at its root) with one good commit and a built database."""
    repo = tmp_path / "shop"
    shutil.copytree(built_shop, repo)
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb\n*.duckdb.wal\ndbt_packages/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop: initial models")
    yield repo


@pytest.fixture(scope="session")
def pg() -> Iterator[PgCluster]:
    """A throw-away PostgreSQL 15 cluster (initdb + pg_ctl, about 1.3 s), one per worker that
    asks for it; fails (never skips) when the server binaries are missing."""
    from tests.pg_cluster import pg_cluster

    with pg_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def sf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SfServer]:
    """A throw-away fakesnow server (the Snowflake emulator), one per test module that asks
    for it, stopped at the module's end."""
    from tests.sf_server import sf_server

    with sf_server(tmp_path_factory.mktemp("fakesnow")) as server:
        yield server


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    """The Airflow failure zoo, run once per run under real Airflow (about 30 s); each worker
    gets its own copy (tests branch, worktree and rerun Airflow in it)."""
    from tests.evidence.airflow_failures import build_zoo, copy_zoo

    return copy_zoo(shared_build(tmp_path_factory, "zoo", build_zoo), tmp_path_factory)


@pytest.fixture(scope="session")
def habits(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    """Airflow 2 task-context habits run once per run under real Airflow 3 (about 25 s); each
    worker gets its own copy, as of the zoo."""
    from tests.evidence.airflow3_failures import build_habits
    from tests.evidence.airflow_failures import copy_zoo

    return copy_zoo(shared_build(tmp_path_factory, "habits", build_habits), tmp_path_factory)


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on the host's loopback recording what each connection sent (a sandboxed
    child must not reach it)."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], received
    server.close()

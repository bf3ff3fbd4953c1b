"""Shared fixtures: real git repos holding the example dbt project, built once per run and
shared by pytest-xdist workers."""

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

if TYPE_CHECKING:
    from tests.evidence.airflow_failures import Zoo

# no phoning home from dbt runs in tests (these machines have no internet)
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "shop"
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


def run_dbt(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dbt"), *args, "--profiles-dir", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
    )


# --- shared builds ---------------------------------------------------------------------------


def shared_build(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """`build(dest)` once per test run, whatever the number of pytest-xdist workers: the first
    worker builds under a file lock in the run's root (the parent of each worker's basetemp)
    and the others wait for it and reuse the result. Without xdist it is the basetemp."""
    base = factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(exist_ok=True)
    dest, done = root / name, root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(dest, ignore_errors=True)  # a failed build (another worker's error)
            dest.mkdir()
            build(dest)
            done.touch()
    return dest


@pytest.fixture(autouse=True)
def _patchit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "patchit-home"
    monkeypatch.setenv("PATCHIT_HOME", str(home))
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
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    """The Airflow failure zoo, run once per run under real Airflow (about 30 s); each worker
    gets its own copy (tests branch, worktree and rerun Airflow in it)."""
    from tests.evidence.airflow_failures import build_zoo, copy_zoo

    return copy_zoo(shared_build(tmp_path_factory, "zoo", build_zoo), tmp_path_factory)


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

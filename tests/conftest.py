"""Shared fixtures: real git repos holding the example dbt project, built once per session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from patchit.examples import SHOP

if TYPE_CHECKING:
    from tests.evidence.airflow_failures import Zoo

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


def run_dbt(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dbt"), *args, "--profiles-dir", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
    )


@pytest.fixture(autouse=True)
def _patchit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "patchit-home"
    monkeypatch.setenv("PATCHIT_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def built_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project after one green `dbt build` (database included), built once."""
    dest = tmp_path_factory.mktemp("built") / "shop"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    res = run_dbt(dest, "build")
    assert res.returncode == 0, res.stdout[-3000:]
    shutil.rmtree(dest / "logs", ignore_errors=True)
    return dest


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
    """The Airflow failure zoo, run once per session under real Airflow (about 30 s)."""
    from tests.evidence.airflow_failures import zoo_failures

    return zoo_failures(tmp_path_factory)


@pytest.fixture(scope="session")
def habits(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    """Airflow 2 task-context habits run once per session under real Airflow 3 (about 25 s)."""
    from tests.evidence.airflow3_failures import habit_failures

    return habit_failures(tmp_path_factory)


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

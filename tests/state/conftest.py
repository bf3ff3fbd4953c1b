"""Fixtures of the shared-state tests: a fresh Postgres database per test on the session's
throw-away cluster (`pg`, which fails with a message when PostgreSQL is missing: `make test`
installs it)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.memory import Memory
from tests.pg_cluster import PgCluster


def fresh_database(pg: PgCluster) -> str:
    name = f"state_{secrets.token_hex(6)}"
    pg.execute(f"create database {name}")
    return name


def database_url(pg: PgCluster, name: str) -> str:
    return f"postgresql://{pg.user}@{pg.host}:{pg.port}/{name}"


@pytest.fixture
def state_url(pg: PgCluster) -> Iterator[str]:
    """The URL of a new, empty database; dropped (connections and all) afterwards."""
    name = fresh_database(pg)
    yield database_url(pg, name)
    pg.execute(f"drop database {name} with (force)")


@pytest.fixture
def pg_home(state_url: str, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`$PATCHIT_HOME` of a deployment whose state is the fresh database."""
    monkeypatch.setenv("PATCHIT_STATE_URL", state_url)
    return _patchit_home


@pytest.fixture
def memory(pg_home: Path) -> Iterator[Memory]:
    """The memory on Postgres, for the SQLite tests reused here."""
    mem = Memory.open(pg_home)
    yield mem
    mem.close()

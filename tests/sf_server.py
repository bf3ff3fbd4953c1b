"""The tests' throw-away Snowflake emulator: a `fakesnow -s -p PORT` server (fakesnow 0.12,
installed by `make test` through the `dev` extra) on a free port with its own data path,
stopped at the end; and the example shop project pointed at it through dbt-snowflake.

fakesnow answers Snowflake's HTTP API on top of DuckDB, so dbt-snowflake and
snowflake-connector-python talk to it as to Snowflake (`host`, `port`, `protocol: http`; any
account, user and password). Each test uses a database of its own on the shared server."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_DATABASES = itertools.count()


@dataclass(frozen=True)
class SfServer:
    host: str
    port: int

    def profile(self, database: str, schema: str) -> dict[str, Any]:
        """A dbt-snowflake profile output reaching database `database` of this server."""
        return {"type": "snowflake", "account": "patchit", "user": "dev", "password": "sf-pass",
                "database": database, "schema": schema, "warehouse": "wh", "role": "dev",
                "host": self.host, "port": self.port, "protocol": "http",
                "threads": 1}  # fmt: skip

    def query(self, database: str, sql: str) -> list[tuple[Any, ...]]:
        import snowflake.connector

        conn = snowflake.connector.connect(
            account="patchit", user="dev", password="sf-pass", host=self.host, port=self.port,
            protocol="http", database=database, login_timeout=10, network_timeout=60,
        )  # fmt: skip
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()


# its own environment (the Makefile's): fakesnow pins sqlglot and duckdb versions patchit's
# environment must not take
FAKESNOW = Path(__file__).resolve().parents[1] / ".venv-fakesnow" / "bin" / "fakesnow"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def sf_server(data: Path) -> Iterator[SfServer]:
    """A fakesnow server on a free port, its databases under `data`; stopped on exit. Fails
    (never skips) when fakesnow is not installed."""
    fakesnow = FAKESNOW
    assert fakesnow.is_file(), f"{fakesnow} is missing: `make install` installs fakesnow there"
    data.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = (data / "fakesnow.log").open("w")
    proc = subprocess.Popen([str(fakesnow), "-s", "-p", str(port), "-d", str(data / "db")],
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (data / "fakesnow.log").read_text()
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "fakesnow did not listen within 60 s"
            time.sleep(0.2)
        yield SfServer("127.0.0.1", port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def new_database() -> str:
    return f"SHOP_{next(_DATABASES)}"


def shop_on_snowflake(tmp_path: Path, sf: SfServer, database: str, source: Path) -> Path:
    """`source` (the shop project) in a git repo at `tmp_path / "shop"`, its profile's target
    schema `analytics` of `database` on `sf`, committed and built green by dbt there (the
    user's last good run)."""
    from tests.conftest import commit_all, git, user_dbt_events

    repo = tmp_path / "shop"
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    profiles = {"shop": {"target": "sf", "outputs": {"sf": sf.profile(database, "analytics")}}}
    (repo / "profiles.yml").write_text(yaml.safe_dump(profiles))
    (repo / ".gitignore").write_text("target/\nlogs/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop on snowflake")
    code, events = user_dbt_events(repo, ["build"])
    assert code == 0 and events == [], [e.error_message for e in events]
    return repo


def database_state(sf: SfServer, database: str) -> dict[str, object]:
    """Every relation of every schema of `database` but patchit's sandboxes, with its row count
    and a digest of its sorted rows; and the schemas (a sandbox left behind would show)."""
    schemas = sorted(str(r[0]) for r in sf.query(
        database, f"select schema_name from {database}.information_schema.schemata"))  # fmt: skip
    state: dict[str, object] = {"schemas": schemas}
    for view in ("tables", "views"):
        rows = sf.query(database, f"select table_schema, table_name from "
                                  f"{database}.information_schema.{view}")  # fmt: skip
        for schema, name in sorted((str(s), str(n)) for s, n in rows):
            if schema.startswith("PATCHIT_") or schema == "INFORMATION_SCHEMA":
                continue
            data = sf.query(database, f'select * from {database}."{schema}"."{name}"')
            digest = hashlib.sha256(repr(sorted(map(repr, data))).encode()).hexdigest()
            state[f"{schema}.{name}"] = (len(data), digest)
    return state


def sandbox_schemas(sf: SfServer, database: str) -> list[str]:
    rows = sf.query(database, f"select schema_name from {database}.information_schema.schemata")
    return sorted(str(r[0]) for r in rows if str(r[0]).startswith("PATCHIT_"))

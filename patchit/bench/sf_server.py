"""A throw-away Snowflake emulator for tests and `patchit bench --warehouse snowflake`: a
`fakesnow -s -p PORT` server (fakesnow 0.12) on a free port of 127.0.0.1, its databases in a
data path of its own, stopped at the end.

fakesnow answers Snowflake's HTTP API on top of DuckDB, so dbt-snowflake and
snowflake-connector-python talk to it as to Snowflake (`host`, `port`, `protocol: http`; any
account, user and password). It lives in an environment of its own (the Makefile's
`.venv-fakesnow`: it pins sqlglot and duckdb versions patchit's environment must not take), so
it is found there, else at `PATCHIT_FAKESNOW`, else on PATH. Missing is an error, not a skip:
`make install` makes it, and a skip would hide a broken install. `tests/sf_server.py`
re-exports this module for the tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchit.bench.pg_server import free_port

CHECKOUT = Path(__file__).resolve().parents[2]
FAKESNOW_ENV = "PATCHIT_FAKESNOW"
START_TIMEOUT_S = 60


class FakesnowMissing(RuntimeError):
    pass


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

    def connect(self, database: str, schema: str | None = None) -> Any:
        import snowflake.connector  # dbt-snowflake brings it

        extra = {} if schema is None else {"schema": schema}
        return snowflake.connector.connect(
            account="patchit", user="dev", password="sf-pass", host=self.host, port=self.port,
            protocol="http", database=database, login_timeout=10, network_timeout=120,
            **extra,
        )  # fmt: skip

    def query(self, database: str, sql: str) -> list[tuple[Any, ...]]:
        conn = self.connect(database)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()


def fakesnow_bin() -> Path:
    """The fakesnow console script: `PATCHIT_FAKESNOW`, the checkout's `.venv-fakesnow`, or
    one on PATH."""
    if os.environ.get(FAKESNOW_ENV):
        chosen = Path(os.environ[FAKESNOW_ENV])
    else:
        chosen = CHECKOUT / ".venv-fakesnow" / "bin" / "fakesnow"
        if not chosen.is_file() and (found := shutil.which("fakesnow")):
            chosen = Path(found)
    if not chosen.is_file():
        raise FakesnowMissing(
            f"the Snowflake emulator is missing ({chosen}): run `make install` (it makes "
            f".venv-fakesnow) or set {FAKESNOW_ENV} to a fakesnow 0.12 executable"
        )
    return chosen


@contextmanager
def sf_server(data: Path | None = None) -> Iterator[SfServer]:
    """A fakesnow server on a free port, its databases under `data` (a temp dir, removed
    afterwards, when None); stopped on exit."""
    fakesnow = fakesnow_bin()
    root = Path(tempfile.mkdtemp(prefix="patchit-fakesnow-")) if data is None else data
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = root / "fakesnow.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(fakesnow), "-s", "-p", str(port), "-d", str(root / "db")],
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            _wait_listening(proc, port, log_path)
            yield SfServer("127.0.0.1", port)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if data is None:
                shutil.rmtree(root, ignore_errors=True)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"fakesnow exited ({proc.returncode}): {log.read_text()[-2000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"fakesnow did not listen on port {port} within "
                               f"{START_TIMEOUT_S} s: {log.read_text()[-2000:]}")  # fmt: skip
        time.sleep(0.2)

"""A throw-away PostgreSQL cluster for tests and `patchit bench --warehouse postgres`:
`initdb` in a temp dir, `pg_ctl start` on a free port on 127.0.0.1 with its unix socket in the
same dir, trust auth, no Docker.

initdb refuses to run as root, so as root (CI) the server runs as the `postgres` user through
`runuser`, in a dir chowned to it. Missing binaries are an error, not a skip: `make test`
installs them (the Makefile's `postgres` target), and a skip would hide a broken install.
`tests/pg_cluster.py` re-exports this module for the tests.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PG_BIN = Path(os.environ.get("PATCHIT_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"


class PostgresMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class PgCluster:
    host: str
    port: int
    user: str
    socket_dir: Path
    data_dir: Path

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def profile(self, schema: str, dbname: str = "postgres") -> dict[str, object]:
        """A dbt-postgres target for this cluster."""
        return {
            "type": "postgres",
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": "",
            "dbname": dbname,
            "schema": schema,
            "threads": 1,
        }

    def connect(self, dbname: str = "postgres") -> Any:
        import psycopg2  # dbt-postgres brings psycopg2-binary

        conn = psycopg2.connect(self.dsn(dbname))
        conn.autocommit = True
        return conn

    def execute(self, sql: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        conn = self.connect(dbname)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", SUPERUSER, "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr or done.stdout}")


def pg_ctl(cluster: PgCluster, *args: str) -> None:
    """`pg_ctl -D <its data dir> -w <args>` on a running cluster, e.g. `restart -m fast` (a
    test of a server that goes away). A restarted server logs where the first one did: with
    its output on pg_ctl's pipe, pg_ctl would never be seen to end."""
    log = cluster.data_dir.parent / "server.log"
    argv = [str(PG_BIN / "pg_ctl"), "-D", str(cluster.data_dir), "-l", str(log), "-w", "-t", "60"]
    _run([*argv, *args], f"pg_ctl {' '.join(args)}")


def check_binaries() -> None:
    missing = [n for n in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / n).is_file()]
    if missing:
        raise PostgresMissing(
            f"PostgreSQL server binaries missing in {PG_BIN} ({', '.join(missing)}): "
            "run `make postgres` (apt-get install postgresql-15) or set PATCHIT_PG_BIN"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise PostgresMissing(
                f"running as root needs the {SUPERUSER!r} user (initdb refuses root): "
                "apt-get install postgresql-15 creates it"
            ) from None


@contextmanager
def pg_cluster() -> Iterator[PgCluster]:
    """Start a fresh cluster; stop it (immediate) and remove its dir afterwards."""
    check_binaries()
    root = Path(tempfile.mkdtemp(prefix="patchit-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        owner = pwd.getpwnam(SUPERUSER)
        for path in (root, sock):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    started = False
    try:
        _run(
            [str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", SUPERUSER,
             "-E", "UTF8", "--no-locale", "--no-sync"],
            "initdb",
        )  # fmt: skip
        port = free_port()
        options = f"-k {sock} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
        _run(
            [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"),
             "-o", options, "-w", "-t", "60", "start"],
            "pg_ctl start",
        )  # fmt: skip
        started = True
        yield PgCluster("127.0.0.1", port, SUPERUSER, sock, data)
    finally:
        if started:
            subprocess.run(
                _as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                 "-w", "stop"]),
                capture_output=True,
                timeout=60,
            )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)

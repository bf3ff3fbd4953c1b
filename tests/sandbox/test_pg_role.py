"""The role candidate SQL runs as on a shared Postgres database (`patchit.sandbox.pg_role`): what
a run's profile logs in as and what a DBA is told to run (no server); and on a real PostgreSQL
15 server, a role made for a heal that reads, builds in its sandbox schema and nothing else,
even after `set role none`, and a dead run's role swept."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from patchit.errors import HarnessError
from patchit.sandbox.pg_orphans import owner_comment, sweep_roles
from patchit.sandbox.pg_role import (
    CannotVerifySafely,
    Restricted,
    admit,
    check_role,
    drop_role,
    grant_reads,
    grant_statements,
    make_role,
    probe_login,
    role_output,
)
from patchit.sandbox.postgres import PgWarehouse
from patchit.state.liveness import this_place
from tests.pg_cluster import PgCluster
from tests.state.conftest import fresh_database

SANDBOX = "patchit_00000000beef"


def test_a_run_logs_in_as_the_role_never_as_the_user() -> None:
    user = {"type": "postgres", "user": "etl", "password": "s3cret", "role": "etl_writer",
            "dbname": "shop", "schema": "analytics"}  # fmt: skip
    out = role_output(user, Restricted("patchit_r_0123456789ab", "pw", made=True))
    assert out == {"type": "postgres", "user": "patchit_r_0123456789ab", "password": "pw",
                   "dbname": "shop", "schema": "analytics"}  # fmt: skip
    assert role_output(user, Restricted("sandbox", None, made=False))["password"] == ""
    said = grant_statements(user, ["analytics", "raw"])
    assert 'create role "patchit_sandbox" login' in said
    assert 'grant select on all tables in schema "raw" to "patchit_sandbox"' in said
    assert 'grant "patchit_sandbox" to "etl"' in said and "PATCHIT_PG_ROLE_PASSWORD" in said
    assert "CREATEROLE" in said


@pytest.fixture
def db(pg: PgCluster) -> Iterator[str]:
    name = fresh_database(pg)
    pg.execute("create schema analytics; create table analytics.precious as select 1 as id", name)
    yield name
    pg.execute(f"drop database {name} with (force)")


def _as(pg: PgCluster, db: str, role: str, password: str, sql: str) -> str:
    """`sql` run as `role` logged in; "" or the error's first line."""
    import psycopg2

    conn = psycopg2.connect(host=pg.host, port=pg.port, user=role, password=password, dbname=db)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
        return ""
    except psycopg2.Error as exc:
        return str(exc).splitlines()[0]
    finally:
        conn.close()


@pytest.mark.slow
def test_a_made_role_reads_builds_in_its_schema_and_writes_nothing_else(
    pg: PgCluster, db: str
) -> None:
    owner = PgWarehouse(pg.profile("analytics", db))
    role = make_role(owner)
    try:
        assert grant_reads(owner, role.role, ["analytics", "missing"]) == []
        owner.reset(SANDBOX)
        admit(owner, role.role, [SANDBOX, f"{SANDBOX}_audit"])
        check_role(owner, role.role, made=True)
        probe_login(pg.profile("analytics", db), role)
        run = role.password or ""
        assert _as(pg, db, role.role, run, f"create table {SANDBOX}_audit.t as "
                   "select * from analytics.precious") == ""  # fmt: skip
        for hostile in ("drop table analytics.precious", "delete from analytics.precious",
                        "create table analytics.planted (x int)", "create schema planted",
                        "set role postgres"):  # fmt: skip
            said = _as(pg, db, role.role, run, f"set role none; {hostile}")
            assert said.startswith(("permission denied", "must be owner")), (hostile, said)
        assert pg.execute("select count(*) from analytics.precious", db) == [(1,)]
        # PUBLIC given a write: the role could write it, so it is refused
        pg.execute("grant delete on analytics.precious to public", db)
        with pytest.raises(CannotVerifySafely, match=r"can write table analytics\.precious"):
            check_role(owner, role.role, made=True)
        owner.drop(SANDBOX)
    finally:
        assert drop_role(owner, role.role)
        owner.close()
    assert pg.execute(f"select count(*) from pg_roles where rolname = '{role.role}'") == [(0,)]
    with pytest.raises(HarnessError, match="not patchit's"):
        drop_role(owner, "postgres")


@pytest.mark.slow
def test_a_nologin_or_unknown_role_is_refused(pg: PgCluster, db: str) -> None:
    owner = PgWarehouse(pg.profile("analytics", db))
    name = f"n_{db}"
    pg.execute(f"create role {name} nologin; grant {name} to postgres")
    try:
        with pytest.raises(CannotVerifySafely, match=r"cannot log in \(NOLOGIN\); SET ROLE is no"):
            check_role(owner, name, made=False)
        with pytest.raises(CannotVerifySafely, match="does not exist"):
            check_role(owner, f"x_{db}", made=False)
    finally:
        owner.close()
        pg.execute(f"drop role {name}")


@pytest.mark.slow
def test_a_dead_runs_role_is_swept_and_a_live_ones_kept(pg: PgCluster, db: str) -> None:
    owner = PgWarehouse(pg.profile("analytics", db))
    dead, live = make_role(owner), make_role(owner)
    try:
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait(timeout=30)
        gone = owner_comment(f"{socket.gethostname()}:{child.pid}:1:{this_place()}", time.time())
        pg.execute(f"comment on role {dead.role} is '{gone}'")
        grant_reads(owner, dead.role, ["analytics"])
        done = {v.schema: (v.drop, dropped) for v, dropped in sweep_roles(owner)}
        assert done[dead.role] == (True, True) and done[live.role] == (False, False)
        left = pg.execute("select rolname from pg_roles where rolname like 'patchit\\_r\\_%'")
        assert (dead.role,) not in left and (live.role,) in left
    finally:
        drop_role(owner, live.role)
        drop_role(owner, dead.role)
        owner.close()

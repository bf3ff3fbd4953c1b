"""An incident's database of its own on a real PostgreSQL 15 server: a `create database ...
template` copy of the user's, made only where Postgres and the limits allow, labelled with its
owner, swept when that owner is dead, and dropped when the incident ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.errors import HarnessError
from patchit.sandbox.pg_clone import (
    CLONE_NAME,
    _drop,
    drop_clone,
    make_clone,
    rewrite_manifest,
    with_dbname,
)
from patchit.sandbox.pg_orphans import parse_comment, sweep_clones
from tests.pg_cluster import PgCluster, pg_project
from tests.state.conftest import fresh_database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1024 * 2**20
# a child that makes a clone as a heal does, says its name, and waits to be killed
MAKER = """
import json, sys, time
from patchit.sandbox.pg_clone import make_clone
clone = make_clone(json.loads(sys.argv[1]), 2**30)
print(clone.name or clone.why, flush=True)
time.sleep(600)
"""


@pytest.fixture
def db(pg: PgCluster) -> Iterator[str]:
    name = fresh_database(pg)
    pg.execute(
        "create schema analytics; create table analytics.orders as "
        "select g as id, g * 10 as amount from generate_series(1, 50) g",
        name,
    )
    yield name
    pg.execute(f"drop database {name} with (force)")


def _databases(pg: PgCluster) -> set[str]:
    rows = pg.execute("select datname from pg_database where datname like 'patchit\\_db\\_%'")
    return {str(r[0]) for r in rows}


def test_a_clone_is_a_labelled_copy_dropped_on_request(pg: PgCluster, db: str) -> None:
    output = pg.profile("analytics", db)
    clone = make_clone(output, LIMIT)
    assert clone.name is not None and CLONE_NAME.match(clone.name), clone.why
    try:
        assert clone.source == db and clone.size > 0 and clone.made_at > 0
        assert pg.execute("select count(*), sum(amount) from analytics.orders", clone.name) == [
            (50, 12750)
        ]
        [(comment,)] = pg.execute(
            f"select shobj_description(oid, 'pg_database') from pg_database "
            f"where datname = '{clone.name}'"
        )
        owned = parse_comment(str(comment))
        assert owned is not None and f":{os.getpid()}:" in owned[0]
        # a write to the copy is not the user's
        pg.execute("delete from analytics.orders", clone.name)
        assert pg.execute("select count(*) from analytics.orders", db) == [(50,)]
    finally:
        assert drop_clone(output, clone.name)
    assert clone.name not in _databases(pg)
    assert not drop_clone(output, clone.name)  # gone: nothing to drop
    conn = pg.connect()
    try:
        conn.autocommit = True
        with conn.cursor() as cur, pytest.raises(HarnessError, match="not a patchit clone"):
            _drop(cur, db, force=True)  # never a database patchit did not make
    finally:
        conn.close()
    assert db in {str(r[0]) for r in pg.execute("select datname from pg_database")}


def test_no_clone_while_another_session_is_on_the_database(pg: PgCluster, db: str) -> None:
    before = _databases(pg)
    other = pg.connect(db)
    try:
        clone = make_clone(pg.profile("analytics", db), LIMIT)
    finally:
        other.close()
    assert clone.name is None
    assert "1 other session(s) or prepared transaction(s) are on database" in clone.why
    assert _databases(pg) == before


def test_no_clone_above_the_limit_or_without_the_right_to_make_one(pg: PgCluster, db: str) -> None:
    before = _databases(pg)
    big = make_clone(pg.profile("analytics", db), limit_bytes=2**20)
    assert big.name is None and "above [sandbox] pg_clone_limit_mb (1 MB)" in big.why
    role = f"r_{db}"
    pg.execute(f"create role {role} login; create role {role}_c login createdb")
    try:
        plain = make_clone({**pg.profile("analytics", db), "user": role}, LIMIT)
        assert plain.name is None and "may not create databases" in plain.why
        creator = make_clone({**pg.profile("analytics", db), "user": f"{role}_c"}, LIMIT)
        assert creator.name is None and f"does not own database {db}" in creator.why
    finally:
        pg.execute(f"drop role {role}; drop role {role}_c")
    assert _databases(pg) == before


def test_a_killed_runs_clone_is_swept_and_a_live_ones_kept(pg: PgCluster, db: str) -> None:
    output = pg.profile("analytics", db)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children: list[subprocess.Popen[str]] = []
    names: list[str] = []
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", MAKER, json.dumps(output)],
                                 stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
        assert child.stdout is not None
        names.append(child.stdout.readline().strip())
        children.append(child)
    dead, live = names
    assert CLONE_NAME.match(dead) and CLONE_NAME.match(live), names
    try:
        os.kill(children[0].pid, signal.SIGKILL)
        children[0].wait(timeout=30)
        dry = {v.schema: (v.drop, dropped) for v, dropped in sweep_clones(output, dry_run=True)}
        assert dry[dead] == (True, False) and dry[live] == (False, False)
        assert {dead, live} <= _databases(pg)
        # a session on the dead run's clone (its orphaned dbt): the sweep does not cut it
        held = pg.connect(dead)
        try:
            [(kept, dropped)] = [(v, d) for v, d in sweep_clones(output) if v.schema == dead]
            assert not dropped and kept.error and "being accessed by other users" in kept.error
        finally:
            held.close()
        done = {v.schema: (v.drop, dropped) for v, dropped in sweep_clones(output)}
        assert done[dead] == (True, True) and done[live] == (False, False)
        assert dead not in _databases(pg) and live in _databases(pg)
    finally:
        children[1].kill()
        children[1].wait(timeout=30)
        drop_clone(output, live)


def test_the_manifest_is_rewritten_to_the_clone() -> None:
    import tempfile

    manifest = {
        "nodes": {
            "model.p.a": {"database": "shop", "schema": "analytics", "relation_name":
                          '"shop"."analytics"."a"'},
            "model.p.b": {"database": "elsewhere", "schema": "x", "relation_name":
                          '"elsewhere"."x"."b"'},
        },
        "sources": {"source.p.raw.o": {"database": "shop", "relation_name": '"shop"."raw"."o"'}},
        "metadata": {"dbt_version": "1.10.0"},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        src, dest = Path(tmp) / "m.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(manifest))
        rewrite_manifest(src, dest, "shop", "patchit_db_0123456789ab")
        out = json.loads(dest.read_text())
        assert json.loads(src.read_text()) == manifest  # the failing run's copy: untouched
    a, b = out["nodes"]["model.p.a"], out["nodes"]["model.p.b"]
    assert a["database"] == "patchit_db_0123456789ab"
    assert a["relation_name"] == '"patchit_db_0123456789ab"."analytics"."a"'
    assert b == manifest["nodes"]["model.p.b"]  # another database's node: as it was
    assert out["sources"]["source.p.raw.o"]["relation_name"].startswith(
        '"patchit_db_0123456789ab"."raw"'
    )
    assert out["metadata"] == manifest["metadata"]
    assert with_dbname({"database": "shop", "x": 1}, "c") == {"dbname": "c", "x": 1}


def test_a_clone_keeps_the_databases_settings_and_admits_no_other_role(
    pg: PgCluster, db: str
) -> None:
    output = pg.profile("analytics", db)
    role = f"r_{db}"
    pg.execute(f"alter database {db} set timezone = 'Asia/Tokyo'; create role {role} login")
    try:
        clone = make_clone(output, LIMIT)
        assert clone.name is not None, clone.why
        try:
            [(setting,)] = pg.execute(
                "select setconfig from pg_db_role_setting s join pg_database d on "
                f"d.oid = s.setdatabase where d.datname = '{clone.name}' and s.setrole = 0"
            )
            assert setting == ["TimeZone=Asia/Tokyo"]
            assert pg.execute("show timezone", clone.name) == [("Asia/Tokyo",)]
            assert pg.execute(
                f"select has_database_privilege('{role}', '{clone.name}', 'CONNECT'), "
                f"has_database_privilege('{role}', '{db}', 'CONNECT')"
            ) == [(False, True)]
        finally:
            drop_clone(output, clone.name)
        # settings for one role in the database: a copy would lose them, so no copy
        pg.execute(f"alter role {role} in database {db} set work_mem = '8MB'")
        refused = make_clone(output, LIMIT)
        assert refused.name is None and "settings for some roles" in refused.why
    finally:
        pg.execute(f"alter role {role} in database {db} reset all; drop role {role}")


def test_a_clone_that_cannot_be_reached_is_dropped_and_the_users_database_serves(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.harnesses.dbt.pg import PgSchemas
    from patchit.sandbox.pg_clone import Clone

    schemas = PgSchemas()
    output = pg.profile("analytics", db)
    gone = Clone("patchit_db_00000000dead", "", db, 1.0, 1)
    served = schemas._reachable(output, gone)
    assert served.name is None and served.source == db
    assert served.why.startswith("its copy patchit_db_00000000dead could not be reached (")
    assert schemas.close() == []


def test_a_project_that_names_its_database_gets_no_clone(tmp_path: Path) -> None:
    from patchit.sandbox.pg_clone import names_its_database

    manifest = tmp_path / "manifest.json"
    plain = {"nodes": {"model.p.a": {"unrendered_config": {"materialized": "table"}}},
             "sources": {"source.p.s.t": {"unrendered_database": None}}}  # fmt: skip
    manifest.write_text(json.dumps(plain))
    assert names_its_database(manifest) == ""
    plain["sources"]["source.p.s.t"]["unrendered_database"] = "analytics"
    manifest.write_text(json.dumps(plain))
    assert names_its_database(manifest) == "source.p.s.t"
    plain["nodes"]["model.p.a"]["unrendered_config"]["database"] = "{{ target.dbname }}"
    manifest.write_text(json.dumps(plain))
    assert names_its_database(manifest) == "model.p.a"
    assert names_its_database(None) == "" and names_its_database(tmp_path / "none") == ""


def test_sandbox_clean_drops_a_dead_runs_clone(pg: PgCluster, db: str, tmp_path: Path) -> None:
    import socket
    import time

    from patchit.sandbox.pg_orphans import owner_comment
    from patchit.state.liveness import this_place

    project = pg_project(tmp_path, pg, db)
    output = pg.profile("analytics", db)
    clone = make_clone(output, LIMIT)
    assert clone.name is not None, clone.why
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    dead = owner_comment(f"{socket.gethostname()}:{child.pid}:1:{this_place()}", time.time())
    pg.execute(f"comment on database {clone.name} is '{dead}'")
    cmd = [sys.executable, "-m", "patchit", "--home", str(tmp_path / "home"), "sandbox", "clean",
           "--project-dir", str(project)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"dropped {clone.name}: its run" in done.stdout
        assert "0 sandbox schema(s) and 1 database(s) of its own, dropped 1" in done.stdout
        assert clone.name not in _databases(pg)
    finally:
        drop_clone(output, clone.name)

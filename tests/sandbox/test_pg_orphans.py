"""Sandbox schemas a `kill -9` left in a real PostgreSQL 15 database: dropped by the next
sandbox and by `patchit sandbox clean` when their owner is provably dead; a live run's, a
foreign `patchit_...` schema and a recent one of another host are kept."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.sandbox.pg_orphans import judge, owner_comment, parse_comment
from tests.pg_cluster import PgCluster, pg_project
from tests.state.conftest import fresh_database

pytestmark = pytest.mark.slow
PLACE = "0b7f6a52-0000-4000-8000-000000000000/4026531836"  # a boot id and pid namespace
ROOT = Path(__file__).resolve().parents[2]
# a child that makes its sandbox schema as a heal does, says so, and waits to be killed
MAKER = """
import sys, time
from pathlib import Path
from patchit.sandbox.postgres import PgWarehouse, sandbox_schema
output = {"type": "postgres", "host": sys.argv[1], "port": int(sys.argv[2]),
          "user": "postgres", "dbname": sys.argv[3], "schema": "x"}
schema = sandbox_schema(Path(sys.argv[4]))
PgWarehouse(output).reset(schema)
print(schema, flush=True)
time.sleep(600)
"""


@pytest.fixture
def db(pg: PgCluster) -> Iterator[str]:
    name = fresh_database(pg)
    yield name
    pg.execute(f"drop database {name} with (force)")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _maker(pg: PgCluster, db: str, scratch: Path) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, "-c", MAKER, pg.host, str(pg.port), db, str(scratch)],
        stdout=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    assert child.stdout is not None
    schema = child.stdout.readline().strip()
    assert schema.startswith("patchit_"), schema
    return child, schema


def _killed_maker(pg: PgCluster, db: str, scratch: Path) -> str:
    """The schema of a run killed with `kill -9` once it made it."""
    killed, schema = _maker(pg, db, scratch)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    return schema


def _schemas(pg: PgCluster, db: str) -> set[str]:
    rows = pg.execute("select nspname from pg_namespace where nspname like 'patchit%'", db)
    return {str(r[0]) for r in rows}


def _plant(pg: PgCluster, db: str) -> dict[str, str]:
    """Schemas no sweep may drop but one (`stale`, another host's, 25 h old)."""
    now = time.time()
    planted = {
        "foreign": "patchit_x",  # not patchit's name pattern
        "uncommented": "patchit_00000000beef",
        "other_comment": "patchit_00000000cafe",
        "old_patchit": "patchit_00000000f00d",
        "recent_other_host": "patchit_00000000aaaa",
        "stale": "patchit_00000000bbbb",
    }
    comments = {
        "other_comment": "the data team scratch schema",
        "old_patchit": "patchit sandbox: dropped when the heal ends; safe to drop",
        "recent_other_host": owner_comment(f"elsewhere-7:4242:99:{PLACE}", now - 3600),
        "stale": owner_comment(f"elsewhere-7:4242:99:{PLACE}", now - 25 * 3600),
    }
    for key, name in planted.items():
        sql = f"create schema {name}; create table {name}.t as select 1 as x"
        if key in comments:
            sql += f"; comment on schema {name} is '{comments[key]}'"
        pg.execute(sql, db)
    return planted


def test_the_next_sandbox_drops_a_killed_runs_schema_and_keeps_the_rest(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.harnesses.dbt.pg import PgSchemas

    killed, dead_schema = _maker(pg, db, tmp_path / "killed")
    pg.execute(f"create schema {dead_schema}_marts", db)  # dbt's custom schema beside it
    live, live_schema = _maker(pg, db, tmp_path / "live")
    planted = _plant(pg, db)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
        schemas = PgSchemas()
        schemas.clone = "never"
        mine = schemas.place(pg.profile("x", db), tmp_path / "mine").schema
        try:
            left = _schemas(pg, db)
            assert dead_schema not in left and f"{dead_schema}_marts" not in left
            assert planted["stale"] not in left
            assert {live_schema, mine} <= left
            assert {v for k, v in planted.items() if k != "stale"} <= left
            assert sorted(schemas.swept) == sorted([dead_schema, planted["stale"]])
        finally:
            assert schemas.close() == []
    finally:
        live.kill()
        live.wait(timeout=30)


def test_sandbox_clean_drops_only_dead_runs_schemas(pg: PgCluster, db: str, tmp_path: Path) -> None:
    local = "    local:\n      type: duckdb\n      path: x.duckdb\n"
    project = pg_project(tmp_path, pg, db, local)
    killed, dead_schema = _maker(pg, db, tmp_path / "killed")
    live, live_schema = _maker(pg, db, tmp_path / "live")
    planted = _plant(pg, db)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    cmd = [sys.executable, "-m", "patchit", "--home", str(tmp_path / "home"), "sandbox", "clean",
           "--project-dir", str(project)]  # fmt: skip
    try:
        dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, env=_env())
        assert dry.returncode == 0, dry.stderr
        assert f"would drop {dead_schema}: its run" in dry.stdout
        assert dead_schema in _schemas(pg, db)
        done = subprocess.run(cmd, capture_output=True, text=True, env=_env())
        assert done.returncode == 0, done.stderr
        assert f"dropped {dead_schema}: its run" in done.stdout
        assert f"kept {live_schema}: its run" in done.stdout and "is alive" in done.stdout
        assert f"kept {planted['uncommented']}: no patchit comment" in done.stdout
        assert f"kept {planted['old_patchit']}: no owner in its comment" in done.stdout
        assert f"dropped {planted['stale']}: run elsewhere-7:4242:99:{PLACE} of another host" in (
            done.stdout
        )
        left = _schemas(pg, db)
        assert dead_schema not in left and planted["stale"] not in left
        assert {live_schema, *(v for k, v in planted.items() if k != "stale")} <= left
        # a target that is not Postgres: one line, exit 2, nothing dropped
        duck = subprocess.run([*cmd, "--target", "local"], capture_output=True, text=True,
                              env=_env())  # fmt: skip
        assert duck.returncode == 2
        assert len(duck.stderr.strip().splitlines()) == 1
        assert "'duckdb', not postgres" in duck.stderr and "--target" in duck.stderr
    finally:
        live.kill()
        live.wait(timeout=30)


def test_the_owner_comment_round_trips_and_unknown_owners_are_kept() -> None:
    comment = owner_comment("h:1:2", 1_800_000_000)
    assert parse_comment(comment) == ("h:1:2", 1_800_000_000)
    assert parse_comment("patchit sandbox: dropped when the heal ends; safe to drop") is None
    assert not judge("patchit_000000000001", None, 0).drop
    assert not judge("patchit_000000000001", "x; owner=h:1:2; created=2020-01-01T00:00:00Z",
                     2e9).drop  # fmt: skip


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def test_only_an_owner_of_this_boot_and_pid_namespace_is_judged_by_its_pid() -> None:
    from patchit.state.liveness import placed_owner, process_start, this_place

    host, now = socket.gethostname(), time.time()
    place = this_place()
    assert place is not None  # /proc here
    pid = _dead_pid()
    dead_here = f"{host}:{pid}:{process_start(os.getpid())}:{place}"
    assert judge("patchit_000000000001", owner_comment(dead_here, now - 5), now).drop
    assert not judge("patchit_000000000001", owner_comment(placed_owner(), now - 5), now).drop
    # the same host name, dead pid, but another pid namespace or boot: its pid says nothing
    boot, _, pidns = place.partition("/")
    for elsewhere in (f"{boot}/{int(pidns) + 1}", f"00000000-0000-4000-8000-000000000000/{pidns}"):
        owner = f"{host}:{pid}:1:{elsewhere}"
        verdict = judge("patchit_000000000001", owner_comment(owner, now - 5), now)
        assert not verdict.drop and "pid namespace" in verdict.why
        assert judge("patchit_000000000001", owner_comment(owner, now - 25 * 3600), now).drop
    # an older patchit's owner (no boot id nor pid namespace): the age alone decides
    old = f"{host}:{pid}:1"
    assert not judge("patchit_000000000001", owner_comment(old, now - 5), now).drop
    assert judge("patchit_000000000001", owner_comment(old, now - 25 * 3600), now).drop


def test_a_live_run_in_another_pid_namespace_on_this_host_keeps_its_schema(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.sandbox.pg_orphans import sweep
    from patchit.sandbox.postgres import PgWarehouse

    # a pid namespace of its own (as root, as CI runs; else inside a user namespace)
    unshare = ["unshare", *(["-r"] if os.geteuid() != 0 else []), "-p", "-f", "--mount-proc"]
    assert shutil.which("unshare"), "unshare is required here: apt-get install util-linux"
    probe = subprocess.run([*unshare, "true"], capture_output=True)
    assert probe.returncode == 0, f"unshare -p cannot run here: {probe.stderr.decode().strip()}"
    child = subprocess.Popen(
        [*unshare, sys.executable, "-c", MAKER, pg.host,
         str(pg.port), db, str(tmp_path / "contained")],
        stdout=subprocess.PIPE, text=True, env=_env(), start_new_session=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        schema = child.stdout.readline().strip()
        assert schema.startswith("patchit_"), schema
        warehouse = PgWarehouse(pg.profile("x", db))
        try:
            done = {v.schema: (v, dropped) for v, dropped in sweep(warehouse)}
        finally:
            warehouse.close()
        verdict, dropped = done[schema]
        assert not dropped and not verdict.drop, verdict.why
        assert schema in _schemas(pg, db)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)


def test_a_dead_runs_schema_that_the_users_objects_depend_on_is_kept_and_said(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.sandbox.pg_orphans import sweep
    from patchit.sandbox.postgres import PgWarehouse, SchemaInUse

    schema = _killed_maker(pg, db, tmp_path / "killed")
    pg.execute(
        f"create table {schema}.orders (id int primary key); insert into {schema}.orders "
        "values (1); create schema analytics; create table analytics.customers "
        f"(id int primary key, order_id int constraint fk references {schema}.orders(id)); "
        f"create view analytics.report as select * from {schema}.orders",
        db,
    )
    user = (
        "select (select count(*) from information_schema.views where table_schema = "
        "'analytics'), (select count(*) from pg_constraint where conname = 'fk')"
    )
    warehouse = PgWarehouse(pg.profile("x", db))
    try:
        for dry_run in (True, False):
            done = {v.schema: (v, dropped) for v, dropped in sweep(warehouse, dry_run=dry_run)}
            verdict, dropped = done[schema]
            assert not dropped and not verdict.drop
            line = verdict.line(dropped)
            assert line.startswith(f"kept {schema}: its run") and "is dead, but objects" in line
            assert "view analytics.report" in line and "constraint fk on table" in line
            assert "\n" not in line, line
        assert pg.execute(user, db) == [(1, 1)] and schema in _schemas(pg, db)
        # no drop of it cascades to the user's objects: not a release, nor a reset
        with pytest.raises(SchemaInUse, match=r"view analytics\.report"):
            warehouse.drop(schema)
        with pytest.raises(SchemaInUse):
            warehouse.reset(schema)
        assert pg.execute(user, db) == [(1, 1)]
        assert pg.execute(f"select count(*) from {schema}.orders", db) == [(1,)]
        # once the user's objects no longer need it, the next sweep drops it
        pg.execute("drop view analytics.report; alter table analytics.customers drop "
                   "constraint fk", db)  # fmt: skip
        assert [(v.schema, d) for v, d in sweep(warehouse)] == [(schema, True)]
        assert schema not in _schemas(pg, db)
    finally:
        warehouse.close()


def test_the_sweep_judges_only_its_roles_schemas_and_goes_on_past_one_it_cannot_drop(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.harnesses.dbt.pg import PgSchemas
    from patchit.state.liveness import this_place

    app, other, stranger = f"app_{db}", f"other_{db}", f"stranger_{db}"
    # `app` is a member of `other` without its privileges (noinherit): it may not drop
    # other's schemas; it is no member of `stranger` at all
    pg.execute(
        f"create role {app} login noinherit; create role {other}; create role {stranger}; "
        f"grant {other} to {app}; grant create on database {db} to {app}, {other}, {stranger}",
        db,
    )
    now = time.time()
    dead = owner_comment(f"{socket.gethostname()}:{_dead_pid()}:1:{this_place()}", now - 60)
    schemas = {"patchit_000000000001": other, "patchit_000000000002": stranger}
    for schema, role in schemas.items():
        pg.execute(f"set role {role}; create schema {schema}; comment on schema {schema} is "
                   f"'{dead}'; create schema {schema}_marts; reset role", db)  # fmt: skip
    # app's own dead run's schema, after theirs
    pg.execute(f"set role {app}; create schema patchit_000000000003; comment on schema "
               f"patchit_000000000003 is '{dead}'; reset role", db)  # fmt: skip
    sandboxes = PgSchemas()
    output = {**pg.profile("x", db), "user": app}
    try:
        sandboxes.sweep_dead(output)
        left = _schemas(pg, db)
        assert "patchit_000000000003" not in left  # app's own: swept past the failure
        assert {*schemas, *(f"{s}_marts" for s in schemas)} <= left
        assert sandboxes.swept == ["patchit_000000000003"]
    finally:
        problems = sandboxes.close()
    assert len(problems) == 1, problems
    assert "patchit_000000000001 of a dead run was not dropped" in problems[0]
    assert "must be owner" in problems[0]


def test_a_dead_runs_custom_schemas_go_with_it_only_when_they_have_its_owner(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.sandbox.pg_orphans import sweep
    from patchit.sandbox.postgres import PgWarehouse

    schema = _killed_maker(pg, db, tmp_path / "killed")
    stranger = f"stranger_{db}"
    pg.execute(f"create role {stranger}; grant create on database {db} to {stranger}; "
               f"create schema {schema}_marts; set role {stranger}; "
               f"create schema {schema}_theirs; reset role", db)  # fmt: skip
    warehouse = PgWarehouse(pg.profile("x", db))  # a superuser: it could drop them all
    try:
        assert [(v.schema, d) for v, d in sweep(warehouse)] == [(schema, True)]
        left = _schemas(pg, db)
        assert schema not in left and f"{schema}_marts" not in left
        assert f"{schema}_theirs" in left
        # a run re-making the schema leaves another role's `<schema>_...` alone too
        warehouse.reset(schema)
        assert warehouse.drop(schema) and f"{schema}_theirs" in _schemas(pg, db)
    finally:
        warehouse.close()


def test_sandbox_clean_exits_1_naming_a_schema_it_could_not_drop(
    pg: PgCluster, db: str, tmp_path: Path
) -> None:
    from patchit.state.liveness import this_place

    app, other = f"app_{db}", f"other_{db}"
    # `app` is a member of `other` without its privileges: it judges other's schema, and its
    # drop fails ("must be owner"); app's own dead run's schema is still dropped
    pg.execute(f"create role {app} login noinherit; create role {other}; grant {other} to {app}; "
               f"grant create on database {db} to {app}, {other}", db)  # fmt: skip
    dead = owner_comment(f"{socket.gethostname()}:{_dead_pid()}:1:{this_place()}", time.time())
    for schema, role in (("patchit_000000000001", other), ("patchit_000000000002", app)):
        pg.execute(f"set role {role}; create schema {schema}; comment on schema {schema} is "
                   f"'{dead}'; reset role", db)  # fmt: skip
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: proj\nprofile: proj\nversion: '1'\n")
    (project / "profiles.yml").write_text(
        f"proj:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
        f"      host: {pg.host}\n      port: {pg.port}\n      user: {app}\n"
        f"      password: ''\n      dbname: {db}\n      schema: analytics\n      threads: 1\n"
    )
    cmd = [sys.executable, "-m", "patchit", "--home", str(tmp_path / "home"), "sandbox", "clean",
           "--project-dir", str(project)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "dropped patchit_000000000002: its run" in done.stdout
    assert "patchit_000000000001" in _schemas(pg, db)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("patchit: error: sandbox schema patchit_000000000001 was not "
                               "dropped: ") and "must be owner" in lines[0]  # fmt: skip
    assert "patchit_000000000001" in lines[1] and "patchit sandbox clean" in lines[1]
    assert "owner" in lines[1]

"""Candidate code never writes production on Postgres (`patchit.sandbox.pg_role`): a breaking
commit carries a typo and models whose hooks drop a production table, empty another and plant
a third (each after `set role none`, which undoes any `SET ROLE`); healed in each mode, the
user's database is as it was:

- copy: patchit's own copy of the database, as a role made for the heal (from the copy, the
  user's role could still `alter database` the user's);
- made: no copy (`pg_clone = "never"`), the profile's user has CREATEROLE: a role made for the
  heal, which cannot write the user's schemas;
- operator: no copy, the operator's `[sandbox] pg_role`;
- none: no copy, no role: escalated with what to grant, nothing run;
- copy_owner: a copy, no role (the profile's user owns the database and may create databases,
  not roles, and holds `pg_execute_server_program`, a superuser's power): escalated too, as
  from a copy that user could still `alter database` the user's and `COPY ... TO PROGRAM`.

Every hostile run also carries a `copy (select 1) to program 'touch ...'` hook: the file the
server would touch never appears.

One cluster for the session (tests/conftest.py `pg`); a database and roles of its own per test.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from patchit.examples import SHOP
from tests.cli.helpers import incidents, patchit_dbt
from tests.conftest import commit_all, git, user_dbt_events
from tests.pg_cluster import PgCluster

pytestmark = pytest.mark.slow

DAILY = "models/marts/daily_revenue.sql"
# each runs after `set role none`: a session that only SET ROLE'd is the user's again
HOSTILE = {
    "hostile_drop": "drop table if exists analytics.precious",
    "hostile_delete": "delete from analytics.customers",
    "hostile_plant": "create table analytics.planted as select 1 as x",
}


@dataclass(frozen=True)
class Shop:
    repo: Path
    db: str
    user: str
    role: str  # the operator's pg_role ("" for none)
    touched: Path  # what the hostile COPY ... TO PROGRAM would make


def _state(pg: PgCluster, db: str) -> dict[str, object]:
    """Every relation of the user's database outside patchit's schemas, with its rows' count
    and checksum; the database's schemas; patchit's roles on the cluster."""
    relations = pg.execute(
        "select table_schema, table_name from information_schema.tables where table_schema "
        "not in ('pg_catalog', 'information_schema') order by 1, 2",
        db,
    )
    state: dict[str, object] = {"relations": relations}
    for schema, name in relations:
        state[f"{schema}.{name}"] = pg.execute(
            "select count(*), md5(coalesce(string_agg(t::text, '|' order by t::text), '')) "
            f"from {schema}.{name} as t",
            db,
        )
    state["schemas"] = pg.execute(
        "select nspname from pg_namespace where nspname not like 'pg\\_%' order by 1", db
    )
    state["roles"] = pg.execute("select rolname from pg_roles where rolname like 'patchit%'")
    state["database"] = pg.execute(
        "select d.datname, s.setconfig from pg_database d left join pg_db_role_setting s on "
        f"s.setdatabase = d.oid where d.datname = '{db}'"
    )
    return state


@pytest.fixture
def shop(request: pytest.FixtureRequest, pg: PgCluster, tmp_path: Path) -> Iterator[Shop]:
    """The shop project, green on a database of its own as the mode's user, with a precious
    table; then the breaking commit (daily_revenue's typo, and with `hostile`, the models
    whose hooks write production, and one that alters the user's database)."""
    mode, hostile = request.param
    token = secrets.token_hex(4)
    db, user, role = f"roles_{token}", "postgres", ""
    pg.execute(f"create database {db}")
    if mode == "copy_owner":  # may copy its database, may not make a role
        user = f"u_{token}"
        pg.execute(f"create role {user} login createdb; alter database {db} owner to {user}; "
                   f"grant pg_execute_server_program to {user}")  # fmt: skip
    elif mode != "copy":
        user = f"u_{token}"
        createrole = " createrole" if mode == "made" else ""
        pg.execute(f"create role {user} login{createrole}; "
                   f"grant create on database {db} to {user}")  # fmt: skip
    repo = tmp_path / "shop"
    shutil.copytree(SHOP, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    profile = {**pg.profile("analytics", db), "user": user}
    (repo / "profiles.yml").write_text(
        yaml.safe_dump({"shop": {"target": "pg", "outputs": {"pg": profile}}})
    )
    (repo / ".gitignore").write_text("target/\nlogs/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop on postgres")
    code, events = user_dbt_events(repo, ["build"])
    assert code == 0 and events == [], [e.error_message for e in events]
    pg.execute(f"set role {user}; create table analytics.precious as "
               "select g as id from generate_series(1, 5) g; reset role", db)  # fmt: skip
    if mode == "operator":  # what the DBA ran (grant_statements)
        role = f"r_{token}"
        pg.execute(
            f"create role {role} login; grant connect, temporary on database {db} to {role}; "
            f"grant usage on schema analytics to {role}; "
            f"grant select on all tables in schema analytics to {role}; grant {role} to {user}",
            db,
        )
    daily = repo / DAILY
    daily.write_text(daily.read_text().replace("sum(amount) as revenue", "sum(amont) as revenue"))
    # and one that reaches the user's database from patchit's copy of it
    touched = Path(f"/tmp/patchit-touched-{token}")  # the server's own /tmp
    reach = {"hostile_reach": f"alter database {db} set work_mem = '1MB'",
             "hostile_program": f"copy (select 1) to program 'touch {touched}'"}  # fmt: skip
    for name, sql in {**HOSTILE, **reach}.items() if hostile else ():
        hooks = f'"set role none", "{sql}"'
        (repo / "models" / "marts" / f"{name}.sql").write_text(
            f"{{{{ config(post_hook=[{hooks}]) }}}}\nselect * from {{{{ ref('daily_revenue') }}}}\n"
        )
    commit_all(repo, "daily_revenue: revenue per day")
    yield Shop(repo, db, user, role, touched)
    touched.unlink(missing_ok=True)
    pg.execute(f"drop database {db} with (force)")
    for name in (role, user if mode != "copy" else ""):
        if name:
            pg.execute(f"drop role {name}")


def _operator(home: Path, mode: str, role: str) -> None:
    """The operator's settings for `mode`."""
    lines = ["[sandbox]"]
    if not mode.startswith("copy"):
        lines.append('pg_clone = "never"')
    if role:
        lines.append(f'pg_role = "{role}"')
    home.mkdir(parents=True, exist_ok=True)
    (home / "patchit.toml").write_text("\n".join(lines) + "\n")


def _heal(pg: PgCluster, shop: Shop) -> tuple[dict[str, object], str, str]:
    """`patchit dbt -- build --select daily_revenue+` on the breaking commit: the incident's
    status and report with patchit's output; the user's database as before."""
    before = _state(pg, shop.db)
    res = patchit_dbt(shop.repo, "build", "--select", "daily_revenue+")
    assert res.returncode == 1, res.stderr  # dbt's own exit code
    assert 'column "amont" does not exist' in res.stdout
    assert "Traceback" not in res.stderr
    [incident] = incidents()
    report = Path(incident["report_md"]).read_text() + res.stderr
    assert _state(pg, shop.db) == before, report
    assert not shop.touched.exists(), report
    assert git(shop.repo, "status", "--porcelain") == ""
    return incident, str(incident["status"]), report


@pytest.mark.parametrize(
    "shop",
    [("copy", True), ("made", True), ("operator", True), ("none", True), ("copy_owner", True)],
    ids=["copy", "made", "operator", "none", "copy_owner"], indirect=True,
)  # fmt: skip
def test_hostile_hooks_change_nothing_of_the_users_database(
    pg: PgCluster, shop: Shop, _patchit_home: Path, request: pytest.FixtureRequest
) -> None:
    mode = request.node.callspec.id
    _operator(_patchit_home, mode, shop.role)
    incident, status, report = _heal(pg, shop)
    if mode == "none":
        assert status == "escalated", report
        assert "cannot verify safely on a shared database" in report
        assert "may not create roles" in report and "grant usage on schema" in report
        assert 'pg_role = "patchit_sandbox"' in report
        assert "unverified suggestion (duckdb_rename_column)" in report
        assert incident["attempts"] == 0 and "; Postgres: built in schema" not in report
    elif mode == "copy_owner":
        assert status == "escalated", report
        assert "cannot verify safely even in a copy of the database" in report
        assert f"alter database {shop.db}" in report and "TO PROGRAM" in report
        assert f'grant "patchit_sandbox" to "{shop.user}"' in report
        assert incident["attempts"] == 0 and "; Postgres: built in" not in report
    else:  # the hooks ran as a role that cannot write production (nor the copy), and failed
        assert status == "failed", report
        assert ("patchit's copy of database" in report) == (mode == "copy")
        assert "permission denied" in report or "must be owner" in report, report
        role = shop.role or "patchit_r_"
        assert f"run as role {role}" in report


@pytest.mark.parametrize(
    "shop", [("made", False), ("operator", False)], ids=["made", "operator"], indirect=True
)
def test_a_right_fix_verifies_and_lands_under_the_restricted_role(
    pg: PgCluster, shop: Shop, _patchit_home: Path, request: pytest.FixtureRequest
) -> None:
    mode = request.node.callspec.id
    _operator(_patchit_home, mode, shop.role)
    incident, status, report = _heal(pg, shop)
    assert status == "fixed", report
    assert "sum(amount) as revenue" in git(shop.repo, "show", f"{incident['branch']}:{DAILY}")
    assert f"run as role {shop.role or 'patchit_r_'}" in report
    assert "data check: same as baseline" in report

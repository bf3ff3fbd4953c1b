"""Real dbt-snowflake against a throw-away Snowflake emulator (fakesnow, tests/sf_server.py):
the shop project builds green; a commit that misspells a column fails; `patchit dbt -- build`
heals it to a verified branch, in a sandbox schema of the user's database, with every relation
of the user's schemas the same before and after and no sandbox schema left; and a sandbox
schema a killed heal left is swept by the next one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from patchit.examples import SHOP
from tests.cli.helpers import incidents, patchit, patchit_dbt
from tests.conftest import commit_all, git
from tests.sf_server import (
    SfServer,
    database_state,
    new_database,
    sandbox_schemas,
    shop_on_snowflake,
)

pytestmark = pytest.mark.slow

DAILY = "models/marts/daily_revenue.sql"
ROLE = "PATCHIT_SANDBOX"  # the operator's restricted role (the emulator has no GRANT to check)


@pytest.fixture(autouse=True)
def _operator_role(_patchit_home: Path) -> None:
    """The operator names the role candidates run as; without it nothing runs (test below)."""
    _patchit_home.mkdir(parents=True, exist_ok=True)
    (_patchit_home / "patchit.toml").write_text(f'[sandbox]\nsf_role = "{ROLE}"\n')


def _broken(tmp_path: Path, sf: SfServer, database: str) -> Path:
    repo = shop_on_snowflake(tmp_path, sf, database, SHOP)
    daily = repo / DAILY
    daily.write_text(daily.read_text().replace("sum(amount) as revenue", "sum(amont) as revenue"))
    commit_all(repo, "daily_revenue: revenue per day")
    return repo


def test_a_column_typo_on_snowflake_is_healed_in_a_sandbox_schema(
    sf: SfServer, tmp_path: Path
) -> None:
    database = new_database()
    repo = _broken(tmp_path, sf, database)
    before = database_state(sf, database)
    assert "ANALYTICS.ORDERS" in before and before["ANALYTICS.ORDERS"][0] > 0  # type: ignore[index]
    res = patchit_dbt(repo, "build", "--select", "daily_revenue")
    assert res.returncode == 1, res.stderr  # dbt's own exit code
    assert 'Referenced column "AMONT" not found' in res.stdout
    assert "Traceback" not in res.stderr
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    assert incident["classification"] == "code_bug"
    fixed = git(repo, "show", f"{incident['branch']}:{DAILY}")
    assert "sum(amount) as revenue" in fixed
    assert "data check: same as baseline" in res.stderr
    report = Path(incident["report_md"]).read_text()
    assert re.search(r"; Snowflake: built in schema PATCHIT_[A-Z0-9]+_C\d+ of the user's "
                     r"database, dropped afterwards", report), report  # fmt: skip
    assert "upstream read live from the user's relations (--defer), nothing copied" in report
    assert "run as the operator's [sandbox] sf_role, which may write only the schemas" in report
    # the user's schemas: every relation's rows as before; no sandbox schema left
    assert database_state(sf, database) == before
    assert sandbox_schemas(sf, database) == []
    assert git(repo, "status", "--porcelain") == ""


def test_a_killed_heals_sandbox_schema_is_swept_and_a_live_ones_kept(
    sf: SfServer, tmp_path: Path
) -> None:
    """A schema whose owner is a dead process of this host goes; one of a live run stays."""
    from patchit.sandbox.snowflake import SfWarehouse
    from patchit.state.liveness import placed_owner

    database = new_database()
    repo = _broken(tmp_path, sf, database)
    warehouse = SfWarehouse(sf.profile(database, "analytics"))
    dead = placed_owner().split(":")
    dead[1] = "999999"  # no such pid: a killed heal
    try:
        warehouse.reset("PATCHIT_KILLED_C1", owner=":".join(dead))
        warehouse.reset("PATCHIT_LIVE_C1")  # this process: alive
        assert sandbox_schemas(sf, database) == ["PATCHIT_KILLED_C1", "PATCHIT_LIVE_C1"]
        said = patchit("sandbox", "clean", "--project-dir", str(repo), "--profiles-dir",
                       str(repo), "--dry-run", cwd=repo)  # fmt: skip
        assert said.returncode == 0, said.stderr
        assert "would drop PATCHIT_KILLED_C1: its run " in said.stdout
        assert "kept PATCHIT_LIVE_C1: its run " in said.stdout and "is alive" in said.stdout
        assert f"database {database}: 2 sandbox schema(s), would drop 1" in said.stdout
        res = patchit_dbt(repo, "build", "--select", "daily_revenue")
        assert res.returncode == 1, res.stderr
        [incident] = incidents()
        assert incident["status"] == "fixed", res.stderr
        assert sandbox_schemas(sf, database) == ["PATCHIT_LIVE_C1"]
    finally:
        warehouse.drop("PATCHIT_LIVE_C1")
        warehouse.close()


ORDER_LOG = """\
{{ config(materialized='incremental', incremental_strategy='append') }}
select order_id, status, amount from {{ ref('orders') }}
{% if is_incremental() %}
where order_id > (select coalesce(max(order_id), 0) from {{ this }})
{% endif %}
"""

# The emulator parses no `create temporary view db.schema.x`, which dbt-snowflake's incremental
# materialization makes for the new rows: the test project makes it a plain view (in the schema
# the model is built in: the sandbox's, when patchit builds it)
EMULATOR_SHIM = """\
{% macro snowflake__create_view_as_with_temp_flag(relation, sql, is_temporary=False) -%}
create or replace view {{ relation }} as (
{{ sql }}
)
{%- endmacro %}
"""


def test_an_incremental_branch_is_healed_on_a_zero_copy_clone_of_the_users_table(
    sf: SfServer, tmp_path: Path
) -> None:
    """The typo is in the incremental branch only: it fails only where dbt takes that branch,
    on the user's table; the sandbox builds on a clone of it, and the table stays as it was."""
    database = new_database()
    source = tmp_path / "source"
    shutil.copytree(SHOP, source, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    (source / "models" / "marts" / "order_log.sql").write_text(ORDER_LOG)
    (source / "macros" / "emulator.sql").write_text(EMULATOR_SHIM)
    repo = shop_on_snowflake(tmp_path, sf, database, source)
    log = repo / "models" / "marts" / "order_log.sql"
    log.write_text(log.read_text().replace("max(order_id)", "max(ordr_id)"))
    commit_all(repo, "order_log: only new orders")
    before = database_state(sf, database)
    assert before["ANALYTICS.ORDER_LOG"][0] > 0  # type: ignore[index]
    res = patchit_dbt(repo, "build", "--select", "order_log")
    assert res.returncode == 1, res.stderr
    assert 'Referenced column "ORDR_ID" not found' in res.stdout
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    fixed = git(repo, "show", f"{incident['branch']}:models/marts/order_log.sql")
    assert "max(order_id)" in fixed
    report = Path(incident["report_md"]).read_text()
    rows = before["ANALYTICS.ORDER_LOG"][0]  # type: ignore[index]
    # frozen at the failing run's start where time travel has the table; the emulator has
    # none, so the clone is of the table as it is, and the report says so
    cloned = f"order_log built on a zero-copy clone of analytics.order_log ({rows} rows, "
    assert cloned + "as it is now, not as of the failing run's start (" in report, report
    assert "does not support time travel" in report
    assert database_state(sf, database) == before
    assert sandbox_schemas(sf, database) == []


def test_without_the_operators_role_nothing_runs_on_snowflake(
    sf: SfServer, tmp_path: Path, _patchit_home: Path
) -> None:
    """Candidate SQL (a hook's raw SQL too) would run as the profile's role, which may write
    the user's schemas: the incident is escalated with the grants, and nothing is made."""
    (_patchit_home / "patchit.toml").unlink()
    database = new_database()
    repo = _broken(tmp_path, sf, database)
    before = database_state(sf, database)
    res = patchit_dbt(repo, "build", "--select", "daily_revenue")
    assert res.returncode == 1, res.stderr
    [incident] = incidents()
    assert incident["status"] == "escalated", res.stderr
    report = Path(incident["report_md"]).read_text()
    assert "cannot verify safely on Snowflake" in report
    assert "grant usage, create schema on database" in report.lower()
    assert database_state(sf, database) == before
    assert sandbox_schemas(sf, database) == []
    assert git(repo, "branch", "--list", "patchit/*") == ""


def test_doctor_says_where_a_snowflake_target_is_verified(sf: SfServer, tmp_path: Path) -> None:
    from patchit.config import SandboxConfig
    from patchit.doctor.warehouse import check_warehouse
    from tests.cli.test_doctor_warehouse import _project

    database = new_database()
    _project(tmp_path / "up", sf.profile(database, "analytics"))
    [unset] = check_warehouse(tmp_path / "up", SandboxConfig())
    assert unset.status == "warn" and "no [sandbox] sf_role" in unset.detail
    assert "grant usage, create schema on database" in unset.fix
    [line] = check_warehouse(tmp_path / "up", SandboxConfig(sf_role=ROLE))
    assert line.status == "ok", line
    assert f"sandbox schemas PATCHIT_<incident>_<n> of database {database}" in line.detail
    # the emulator has no grants to read (tests/sandbox/test_sf_grants.py: real Snowflake's)
    assert "its grants not read: the emulator (fakesnow) has no access control" in line.detail
    assert 'no database of patchit\'s own ([sandbox] sf_database = "never")' in line.detail
    [auto] = check_warehouse(tmp_path / "up", SandboxConfig(sf_role=ROLE, sf_database="auto"))
    assert auto.status == "ok", auto
    assert (f"a zero-copy clone of database {database} per incident where the role may create "
            "a database (its grants not read), else sandbox schemas") in auto.detail  # fmt: skip
    assert sandbox_schemas(sf, database) == []  # nothing made
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    _project(tmp_path / "down", {**sf.profile(database, "analytics"), "port": port})
    [down] = check_warehouse(tmp_path / "down", SandboxConfig(sf_role=ROLE))
    assert down.status == "fail" and "not reachable" in down.detail


def test_the_data_check_compares_two_sandbox_schemas_inside_snowflake(sf: SfServer) -> None:
    """Row counts and per-column checksums computed in the warehouse; a relation only the user
    has is read where `--defer` read it; a sample of the differing rows both ways."""
    from patchit.fidelity.sf_data import SfWarehouseDiff
    from patchit.sandbox.snowflake import SfWarehouse

    database = new_database()
    output = sf.profile(database, "analytics")
    warehouse = SfWarehouse(output)
    try:
        warehouse.query(f"create schema {database}.analytics")
        warehouse.query(f"create table {database}.analytics.customers as "
                        "select 1 as customer_id, 'ann' as name")  # fmt: skip
        for schema, amount in (("PATCHIT_T_R1", 10), ("PATCHIT_T_C1", 12)):
            warehouse.reset(schema)
            warehouse.query(
                f"create table {database}.{schema}.orders as select * from (values "
                f"(1, 'done', 5), (2, 'done', {amount})) as v(order_id, status, amount)"
            )
        with SfWarehouseDiff(output, "PATCHIT_T_R1", "PATCHIT_T_C1") as diff:
            assert diff.checksum.startswith("sum(hash(")  # the emulator has no hash_agg
            same = diff.compare("PATCHIT_T_C1", "customers")  # deferred: the user's relation
            assert same.label == "analytics.customers" and not same.differs
            raw = diff.compare("PATCHIT_T_C1", "orders")
            assert raw.label == "analytics.orders" and raw.differs
            assert raw.differing == ["amount"] and raw.base and raw.base.rows == 2
            sample = diff.sample(raw, raw.differing)
        lines = sample.splitlines()
        assert any("baseline" in line and "10" in line for line in lines), sample
        assert any("candidate" in line and "12" in line for line in lines), sample
    finally:
        for schema in ("PATCHIT_T_R1", "PATCHIT_T_C1"):
            warehouse.drop(schema)
        warehouse.close()

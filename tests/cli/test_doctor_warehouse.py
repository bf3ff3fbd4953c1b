"""`patchit doctor`'s line for the repository's dbt target: a DuckDB file, a real Postgres 15
database (reachable, sandbox schemas allowed, a copy per incident or why not), another
warehouse. Nothing is created on the server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from patchit.config import SandboxConfig
from patchit.doctor.warehouse import check_warehouse, find_project
from tests.cli.helpers import patchit
from tests.pg_cluster import PgCluster, sandbox_databases
from tests.state.conftest import fresh_database


def _project(root: Path, output: dict[str, object]) -> Path:
    project = root / "warehouse"
    project.mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: wh\nprofile: wh\nversion: '1'\n")
    profiles = {"wh": {"target": "dev", "outputs": {"dev": output}}}
    (project / "profiles.yml").write_text(yaml.safe_dump(profiles))
    return project


def test_duckdb_and_other_targets_and_no_project(tmp_path: Path) -> None:
    assert check_warehouse(tmp_path, SandboxConfig()) == []  # not a dbt repository
    (_project(tmp_path, {"type": "duckdb", "path": "wh.duckdb"}) / "wh.duckdb").write_bytes(b"")
    assert find_project(tmp_path) == tmp_path / "warehouse"
    [duck] = check_warehouse(tmp_path, SandboxConfig())
    assert duck.status == "ok" and "wh.dev (duckdb)" in duck.detail and "copied" in duck.detail
    fresh = tmp_path / "fresh"  # a fresh clone, the file under dbt's target folder
    _project(fresh, {"type": "duckdb", "path": "target/wh.duckdb"})
    [line] = check_warehouse(fresh, SandboxConfig())
    assert line.status == "ok" and "target/wh.duckdb does not exist yet" in line.detail
    assert "the same path in each candidate's worktree" in line.detail
    other = tmp_path / "other"
    _project(other, {"type": "bigquery", "project": "x", "dataset": "s"})
    [bq] = check_warehouse(other, SandboxConfig())
    assert bq.status == "warn" and "not verified in a sandbox" in bq.detail
    broken = tmp_path / "broken"
    (broken / "p").mkdir(parents=True)
    (broken / "p" / "dbt_project.yml").write_text("name: p\nprofile: nope\nversion: '1'\n")
    (broken / "p" / "profiles.yml").write_text("other: {}\n")
    [bad] = check_warehouse(broken, SandboxConfig())
    assert bad.status == "fail" and "nope" in bad.detail


@pytest.mark.slow
def test_a_postgres_target_says_where_fixes_are_verified(pg: PgCluster, tmp_path: Path) -> None:
    db = fresh_database(pg)
    databases = sandbox_databases(pg)  # other tests' on this session's cluster
    try:
        _project(tmp_path, pg.profile("analytics", db))
        [line] = check_warehouse(tmp_path, SandboxConfig())
        assert line.status == "ok", line
        assert f"verified in a copy of database {db} made for each incident" in line.detail
        assert sandbox_databases(pg) == databases  # nothing made
        [small] = check_warehouse(tmp_path, SandboxConfig(pg_clone_limit_mb=1))
        assert "no copy of it now: database" in small.detail and "pg_clone_limit_mb" in small.detail
        [never] = check_warehouse(tmp_path, SandboxConfig(pg_clone="never"))
        assert '[sandbox] pg_clone = "never"' in never.detail
        assert "as a role patchit makes for each heal (the profile's user has CREATEROLE)" in (
            never.detail
        )
        plain = f"p_{db}"  # no copy, no role: escalated, and the grants to run
        pg.execute(f"create role {plain} login; grant create on database {db} to {plain}")
        try:
            shutil.rmtree(tmp_path / "warehouse")
            _project(tmp_path, {**pg.profile("analytics", db), "user": plain})
            [unsafe] = check_warehouse(tmp_path, SandboxConfig(pg_clone="never"))
            assert unsafe.status == "warn" and "cannot verify safely" in unsafe.detail, unsafe
            assert 'grant "patchit_sandbox" to "' + plain + '"' in unsafe.fix
            [gone] = check_warehouse(tmp_path, SandboxConfig(pg_clone="never", pg_role="nobody"))
            assert gone.status == "fail" and "pg_role nobody does not exist" in gone.detail
            pg.execute(f"create role s_{db} login; grant s_{db} to {plain}")
            [good] = check_warehouse(tmp_path, SandboxConfig(pg_clone="never", pg_role=f"s_{db}"))
            assert good.status == "ok" and f"as role s_{db} ([sandbox] pg_role)" in good.detail
            pg.execute(f"create table public.t_{db} (x int); grant insert on public.t_{db} to "
                       "public", db)  # fmt: skip
            [public] = check_warehouse(tmp_path, SandboxConfig(pg_clone="never", pg_role=f"s_{db}"))
            assert public.status == "fail" and f"can write table public.t_{db}" in public.detail
        finally:
            shutil.rmtree(tmp_path / "warehouse")
            _project(tmp_path, pg.profile("analytics", db))
            pg.execute(f"drop table if exists public.t_{db}", db)
            pg.execute(f"drop role if exists s_{db}; drop owned by {plain}; drop role {plain}", db)
        role = f"r_{db}"
        pg.execute(f"create role {role} login; revoke create on database {db} from public")
        try:
            shutil.rmtree(tmp_path / "warehouse")
            _project(tmp_path, {**pg.profile("analytics", db), "user": role})
            [denied] = check_warehouse(tmp_path, SandboxConfig())
            assert denied.status == "fail" and "cannot create patchit's sandbox schemas" in (
                denied.detail
            )
            assert f"grant create on database {db}" in denied.fix
        finally:
            pg.execute(f"drop role {role}")
        # through the CLI: the line, and exit 1 for the failed check
        res = patchit("doctor", "--repo", str(tmp_path))
        assert res.returncode == 1 and "fail  dbt target: wh.dev (postgres)" in res.stdout
    finally:
        pg.execute(f"drop database {db} with (force)")

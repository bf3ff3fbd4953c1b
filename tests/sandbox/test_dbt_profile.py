"""Resolving the user's dbt target the way dbt does, and writing the sandbox profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from patchit.errors import BadInputError
from patchit.events.model import DbtInvocation, UniversalFailureEvent
from patchit.sandbox.dbt_profile import (
    resolve_dbt_target,
    sandbox_db_location,
    unsupported_sandbox,
    user_target_dir,
    write_sandbox_profile,
)

PROFILES = """\
shop:
  target: "{{ env_var('SHOP_TARGET', 'dev') }}"
  outputs:
    dev:
      type: duckdb
      path: "{{ env_var('SHOP_DB', 'data/shop.duckdb') }}"
      threads: "{{ env_var('SHOP_THREADS', '4') | as_number }}"
    ci:
      type: duckdb
      path: /abs/ci.duckdb
      threads: 2
    mem:
      type: duckdb
      path: ":memory:"
    cloud:
      type: duckdb
      path: "md:analytics"
    pg:
      type: postgres
      host: db.internal
      password: "{{ env_var('PG_SECRET', 's3cret-pw') }}"
      schema: analytics
    sf:
      type: snowflake
      account: acme
      user: dbt
      password: "{{ env_var('SF_SECRET', 'sf-s3cret') }}"
      database: analytics
      schema: jaffle
      host: 127.0.0.1
      port: 8001
      protocol: http
    bq:
      type: bigquery
      project: acme
other:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: other.duckdb
"""


def make_event(project: Path, cwd: Path, **dbt: object) -> UniversalFailureEvent:
    invocation = DbtInvocation(
        command="build", args=["build"], project_dir=str(project), cwd=str(cwd), **dbt
    )
    return UniversalFailureEvent(
        source="dbt", pipeline_id="shop", unit_id="model.shop.orders", dbt=invocation
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "repo" / "shop"
    project.mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\nconfig-version: 2\n")
    (project / "profiles.yml").write_text(PROFILES)
    return project


def test_project_profiles_with_env_var_defaults_and_relative_path(project: Path) -> None:
    cwd = project.parent
    target = resolve_dbt_target(make_event(project, cwd))
    assert (target.profile, target.target) == ("shop", "dev")
    assert target.output["threads"] == 4
    assert target.db_path == cwd / "data" / "shop.duckdb"  # relative to where dbt ran
    assert target.profiles_file == project / "profiles.yml"


def test_env_var_from_the_event_and_explicit_target(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_THREADS", "8")
    event = make_event(project, project, env={"SHOP_DB": "warehouse.duckdb"})
    target = resolve_dbt_target(event)
    assert target.db_path == project / "warehouse.duckdb"
    assert target.output["threads"] == 8
    ci = resolve_dbt_target(make_event(project, project, target="ci"))
    assert (ci.target, ci.db_path) == ("ci", Path("/abs/ci.duckdb"))
    assert resolve_dbt_target(make_event(project, project, target="mem")).db_path is None


def test_profiles_dir_order(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "profiles.yml").write_text(
        "shop:\n  target: prod\n  outputs:\n    prod:\n      type: duckdb\n      path: p.duckdb\n"
    )
    by_flag = resolve_dbt_target(make_event(project, project, profiles_dir=str(elsewhere)))
    assert by_flag.target == "prod"
    by_env = make_event(project, project, env={"DBT_PROFILES_DIR": "../../elsewhere"})
    assert resolve_dbt_target(by_env).profiles_file == elsewhere / "profiles.yml"
    other = resolve_dbt_target(make_event(project, project, profile="other"))
    assert other.db_path == project / "other.duckdb"

    (project / "profiles.yml").unlink()
    home = tmp_path / "home"
    (home / ".dbt").mkdir(parents=True)
    (home / ".dbt" / "profiles.yml").write_text(PROFILES)
    monkeypatch.setenv("HOME", str(home))
    assert resolve_dbt_target(make_event(project, project)).profiles_file == (
        home / ".dbt" / "profiles.yml"
    )


def test_bad_profiles_name_the_file(project: Path, tmp_path: Path) -> None:
    profiles = project / "profiles.yml"
    with pytest.raises(BadInputError, match="no profile named 'nope'"):
        resolve_dbt_target(make_event(project, project, profile="nope"))
    with pytest.raises(BadInputError, match="no output 'staging'"):
        resolve_dbt_target(make_event(project, project, target="staging"))
    with pytest.raises(BadInputError, match="remote"):
        resolve_dbt_target(make_event(project, project, target="cloud"))
    profiles.write_text("shop: [unclosed\n")
    with pytest.raises(BadInputError, match=re.escape(str(profiles))):
        resolve_dbt_target(make_event(project, project))
    profiles.write_text("shop:\n  outputs:\n    dev:\n      path: \"{{ env_var('NOPE_X') }}\"\n")
    with pytest.raises(BadInputError, match="NOPE_X"):
        resolve_dbt_target(make_event(project, project, target="dev"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInputError, match=re.escape(str(empty / "profiles.yml"))):
        resolve_dbt_target(make_event(project, project, profiles_dir=str(empty)))


def test_write_sandbox_profile_points_at_the_copy_only(project: Path, tmp_path: Path) -> None:
    target = resolve_dbt_target(make_event(project, project))
    copy = tmp_path / "scratch" / "db" / "shop.duckdb"
    written = write_sandbox_profile(target, copy, tmp_path / "scratch")
    data = YAML(typ="safe").load(written.read_text())
    assert data == {
        "shop": {
            "target": "dev",
            "outputs": {"dev": {"type": "duckdb", "path": str(copy), "threads": 4}},
        }
    }
    bq = resolve_dbt_target(make_event(project, project, target="bq"))
    with pytest.raises(BadInputError, match="BigQuery sandboxes are not supported yet"):
        write_sandbox_profile(bq, copy, tmp_path / "bq")


def test_a_snowflake_sandbox_profile_has_the_sandbox_schema_and_no_password(
    project: Path, tmp_path: Path
) -> None:
    sf = resolve_dbt_target(make_event(project, project, target="sf"))
    assert sf.output["password"] == "sf-s3cret"
    with pytest.raises(BadInputError, match="needs its sandbox schema"):
        write_sandbox_profile(sf, tmp_path / "unused", tmp_path / "sf")
    written = write_sandbox_profile(sf, tmp_path / "unused", tmp_path / "sf", schema="PATCHIT_A_C1")
    assert "sf-s3cret" not in written.read_text()
    output = YAML(typ="safe").load(written.read_text())["shop"]["outputs"]["sf"]
    assert output == {
        "type": "snowflake", "account": "acme", "user": "dbt", "database": "analytics",
        "schema": "PATCHIT_A_C1", "host": "127.0.0.1", "port": 8001, "protocol": "http",
        "password": "{{ env_var('PATCHIT_SANDBOX_SF_PASSWORD') }}",
    }  # fmt: skip


def test_a_snowflake_sandbox_schema_names_the_incident_and_the_candidate(tmp_path: Path) -> None:
    from patchit.sandbox.snowflake import SANDBOX_NAME, sandbox_schema

    incident = tmp_path / "sandboxes" / "inc-3f2a9c0d"
    assert sandbox_schema(incident / "candidate-3") == "PATCHIT_INC3F2A9C0D_C3"
    assert sandbox_schema(incident / "baseline" / "run-1") == "PATCHIT_BASELINE_R1"
    odd = sandbox_schema(incident / "screen")
    assert odd.startswith("PATCHIT_INC3F2A9C0D_H") and odd != sandbox_schema(incident / "other")
    names = [sandbox_schema(incident / "candidate-3"), odd]
    assert all(SANDBOX_NAME.match(name) for name in names)
    assert not SANDBOX_NAME.match("PATCHIT_INC3F2A9C0D_C3_MARTS")  # dbt's custom schema beside


def test_a_postgres_sandbox_profile_has_the_sandbox_schema_and_no_password(
    project: Path, tmp_path: Path
) -> None:
    pg = resolve_dbt_target(make_event(project, project, target="pg"))
    assert pg.output["password"] == "s3cret-pw"
    with pytest.raises(BadInputError, match="needs its sandbox schema"):
        write_sandbox_profile(pg, tmp_path / "unused", tmp_path / "pg")
    written = write_sandbox_profile(pg, tmp_path / "unused", tmp_path / "pg", schema="patchit_x")
    assert "s3cret-pw" not in written.read_text()
    output = YAML(typ="safe").load(written.read_text())["shop"]["outputs"]["pg"]
    assert output == {
        "type": "postgres", "host": "db.internal", "schema": "patchit_x",
        "password": "{{ env_var('PATCHIT_SANDBOX_PG_PASSWORD') }}",
    }  # fmt: skip


def test_sandbox_db_location_keeps_a_relative_path_inside_the_worktree(
    project: Path, tmp_path: Path
) -> None:
    worktree = tmp_path / "wt"
    cwd = worktree / "shop"
    target = resolve_dbt_target(make_event(project, project.parent))
    # data/shop.duckdb from cwd stays in the worktree: same string, copy where it points
    assert sandbox_db_location(target, cwd, worktree) == (
        (cwd / "data" / "shop.duckdb").resolve(),
        "data/shop.duckdb",
    )
    escaping = resolve_dbt_target(make_event(project, project, env={"SHOP_DB": "../../x.duckdb"}))
    ci = resolve_dbt_target(make_event(project, project, target="ci"))
    for other, name in ((escaping, "x.duckdb"), (ci, "ci.duckdb")):
        assert sandbox_db_location(other, cwd, worktree) == (
            (cwd / ".patchit" / name).resolve(),
            f".patchit/{name}",
        )
    written = write_sandbox_profile(
        target, cwd / "data" / "shop.duckdb", tmp_path / "s", "data/shop.duckdb"
    )
    assert YAML(typ="safe").load(written.read_text())["shop"]["outputs"]["dev"]["path"] == (
        "data/shop.duckdb"
    )


def test_user_target_dir_follows_dbt(project: Path) -> None:
    assert user_target_dir(make_event(project, project)) == project / "target"
    by_env = make_event(project, project, env={"DBT_TARGET_PATH": "out"})
    assert user_target_dir(by_env) == project / "out"
    assert by_env.dbt is not None
    by_env.dbt.args = ["build", "--target-path", "/abs/t"]  # the flag beats the variable
    assert user_target_dir(by_env) == Path("/abs/t")
    (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\ntarget-path: build\n")
    assert user_target_dir(make_event(project, project)) == project / "build"


def test_a_bigquery_target_is_named_in_one_line_as_unsupported(project: Path) -> None:
    assert unsupported_sandbox(resolve_dbt_target(make_event(project, project))) is None
    for supported in ("pg", "sf"):
        output = resolve_dbt_target(make_event(project, project, target=supported))
        assert unsupported_sandbox(output) is None
    said = unsupported_sandbox(resolve_dbt_target(make_event(project, project, target="bq")))
    assert said is not None and "\n" not in said
    assert said.startswith("profile 'shop', target 'bq' in ")
    assert "BigQuery sandboxes are not supported yet (DuckDB, Postgres and Snowflake only" in said


def test_the_loop_escalates_only_the_warehouses_without_a_sandbox(project: Path) -> None:
    from patchit.loop.loop import _unsupported_warehouse

    assert _unsupported_warehouse(make_event(project, project)) is None
    assert _unsupported_warehouse(make_event(project, project, target="pg")) is None
    assert _unsupported_warehouse(make_event(project, project, target="sf")) is None
    said = _unsupported_warehouse(make_event(project, project, target="bq"))
    assert said is not None and "BigQuery sandboxes are not supported yet" in said

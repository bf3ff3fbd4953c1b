"""The tests' throw-away PostgreSQL clusters: `patchit.bench.pg_server` (the benchmark starts
the same ones); and the example shop project pointed at one."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from patchit.bench.pg_server import (
    PG_BIN,
    SUPERUSER,
    PgCluster,
    PostgresMissing,
    check_binaries,
    pg_cluster,
    pg_ctl,
)

__all__ = [
    "PG_BIN",
    "SUPERUSER",
    "PgCluster",
    "PostgresMissing",
    "check_binaries",
    "heal_fixed",
    "pg_cluster",
    "pg_ctl",
    "pg_project",
    "sandbox_databases",
    "sandbox_schemas",
    "shop_on_postgres",
]


def shop_on_postgres(tmp_path: Path, pg: PgCluster, schema: str, source: Path, green: bool) -> Path:
    """`source` (the shop project) in a git repo at `tmp_path / "shop"`, its profile's target
    `schema` of `pg`, committed; with `green`, built by dbt there as the user's last good run."""
    from tests.conftest import commit_all, git, user_dbt_events

    repo = tmp_path / "shop"
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    profiles = {"shop": {"target": "pg", "outputs": {"pg": pg.profile(schema)}}}
    (repo / "profiles.yml").write_text(yaml.safe_dump(profiles))
    (repo / ".gitignore").write_text("target/\nlogs/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop on postgres")
    if green:
        code, events = user_dbt_events(repo, ["build"])
        assert code == 0 and events == [], [e.error_message for e in events]
    return repo


def pg_project(root: Path, pg: PgCluster, db: str, *extra_outputs: str) -> Path:
    """A dbt project dir `root/proj` whose profile's `dev` target is database `db` of `pg`
    (schema `analytics`), with `extra_outputs` (YAML lines of more outputs) beside it."""
    project = root / "proj"
    project.mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: proj\nprofile: proj\nversion: '1'\n")
    (project / "profiles.yml").write_text(
        f"proj:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
        f"      host: {pg.host}\n      port: {pg.port}\n      user: postgres\n"
        f"      password: ''\n      dbname: {db}\n      schema: analytics\n      threads: 1\n"
        + "".join(extra_outputs)
    )
    return project


def schema_state(pg: PgCluster, schema: str) -> dict[str, object]:
    """Every relation of the user's schema with its row count and a checksum of its rows,
    and the database's schemas (a sandbox schema left behind would show)."""
    relations = pg.execute(
        "select table_name, table_type from information_schema.tables "
        f"where table_schema = '{schema}' order by 1"
    )
    state: dict[str, object] = {"relations": relations}
    for name, _kind in relations:
        state[str(name)] = pg.execute(
            f"select count(*), md5(coalesce(string_agg(t::text, '|' order by t::text), '')) "
            f"from {schema}.{name} as t"
        )
    # the server's temp namespaces (a session's temp tables: dbt's incremental `__dbt_tmp`)
    # stay listed, empty, once made: not the user's
    state["schemas"] = pg.execute(
        "select nspname from pg_namespace where nspname not like 'pg\\_temp\\_%' "
        "and nspname not like 'pg\\_toast\\_temp\\_%' order by 1"
    )
    return state


def sandbox_schemas(pg: PgCluster) -> list[object]:
    """patchit's sandbox schemas on the cluster now (other tests' too: compare before/after)."""
    return pg.execute("select nspname from pg_namespace where nspname like 'patchit%' order by 1")


def sandbox_databases(pg: PgCluster) -> list[object]:
    """patchit's databases of its own (`patchit_db_<hex>`) on the cluster now."""
    return pg.execute(
        "select datname from pg_database where datname like 'patchit\\_db\\_%' order by 1"
    )


def heal_fixed(pg: PgCluster, repo: Path, schema: str, select: str, error: str) -> tuple[str, str]:
    """`patchit dbt -- build --select <select>` on the broken commit: dbt's `error`, a `fixed`
    incident, the user's schema and the cluster's sandboxes as before, the checkout clean.
    Returns the fixed branch and the report's text."""
    from tests.cli.helpers import incidents, patchit_dbt
    from tests.conftest import git

    before, others = schema_state(pg, schema), sandbox_schemas(pg)
    res = patchit_dbt(repo, "build", "--select", select)
    assert res.returncode == 1, res.stderr  # dbt's own exit code
    assert error in res.stdout and "Traceback" not in res.stderr
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    assert schema_state(pg, schema) == before
    assert sandbox_schemas(pg) == others
    assert git(repo, "status", "--porcelain") == ""
    return str(incident["branch"]), Path(incident["report_md"]).read_text() + res.stderr

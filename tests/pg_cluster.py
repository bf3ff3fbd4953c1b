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
    "pg_cluster",
    "pg_ctl",
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

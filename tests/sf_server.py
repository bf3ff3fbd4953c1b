"""The tests' throw-away Snowflake emulator: `patchit.bench.sf_server` (the benchmark starts
the same one: fakesnow on a free port with its own data path, stopped at the end); and the
example shop project pointed at it through dbt-snowflake. Each test uses a database of its own
on the shared server."""

from __future__ import annotations

import hashlib
import itertools
import shutil
from pathlib import Path

import yaml

from patchit.bench.sf_server import SfServer, sf_server

__all__ = ["SfServer", "database_state", "new_database", "sandbox_schemas", "sf_server",
           "shop_on_snowflake"]  # fmt: skip

_DATABASES = itertools.count()


def new_database() -> str:
    return f"SHOP_{next(_DATABASES)}"


def shop_on_snowflake(tmp_path: Path, sf: SfServer, database: str, source: Path) -> Path:
    """`source` (the shop project) in a git repo at `tmp_path / "shop"`, its profile's target
    schema `analytics` of `database` on `sf`, committed and built green by dbt there (the
    user's last good run)."""
    from tests.conftest import commit_all, git, user_dbt_events

    repo = tmp_path / "shop"
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    profiles = {"shop": {"target": "sf", "outputs": {"sf": sf.profile(database, "analytics")}}}
    (repo / "profiles.yml").write_text(yaml.safe_dump(profiles))
    (repo / ".gitignore").write_text("target/\nlogs/\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "shop on snowflake")
    code, events = user_dbt_events(repo, ["build"])
    assert code == 0 and events == [], [e.error_message for e in events]
    return repo


def database_state(sf: SfServer, database: str) -> dict[str, object]:
    """Every relation of every schema of `database` but patchit's sandboxes, with its row count
    and a digest of its sorted rows; and the schemas (a sandbox left behind would show)."""
    schemas = sorted(str(r[0]) for r in sf.query(
        database, f"select schema_name from {database}.information_schema.schemata"))  # fmt: skip
    state: dict[str, object] = {"schemas": schemas}
    for view in ("tables", "views"):
        rows = sf.query(database, f"select table_schema, table_name from "
                                  f"{database}.information_schema.{view}")  # fmt: skip
        for schema, name in sorted((str(s), str(n)) for s, n in rows):
            if schema.startswith("PATCHIT_") or schema == "INFORMATION_SCHEMA":
                continue
            data = sf.query(database, f'select * from {database}."{schema}"."{name}"')
            digest = hashlib.sha256(repr(sorted(map(repr, data))).encode()).hexdigest()
            state[f"{schema}.{name}"] = (len(data), digest)
    return state


def sandbox_schemas(sf: SfServer, database: str) -> list[str]:
    rows = sf.query(database, f"select schema_name from {database}.information_schema.schemata")
    return sorted(str(r[0]) for r in rows if str(r[0]).startswith("PATCHIT_"))

"""The corpus's dbt scenarios on Postgres (`patchit bench --warehouse postgres`).

One throw-away cluster (`patchit.bench.pg_server`) serves the whole run. The base project is
copied once with its profile retargeted at it: the same profile and target names, `type:
postgres`, and `schema: "{{ env_var('BENCH_PG_SCHEMA') }}"`. Every checkout of a scenario (the
good run, the reference, the user's, each branch checked) is run with its own schema, named
after its path, so they never see each other's relations, as their DuckDB files did not.

"The user's data untouched" is judged on the content of the user's schemas (relations, columns,
sorted rows), read by patchit's bench, never by the runs being judged. The hidden check's SQL
is written for DuckDB: a trailing `order by all` is dropped and the rows are sorted here.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from patchit.bench.pg_server import PgCluster

SCHEMA_ENV = "BENCH_PG_SCHEMA"
_ORDER_BY_ALL = re.compile(r"\s+order\s+by\s+all\s*;?\s*$", re.IGNORECASE)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return round(value, 6)
    try:  # numeric comes back as Decimal: compare it as DuckDB's doubles would print
        return round(float(value), 6) if hasattr(value, "as_tuple") else str(value)
    except (TypeError, ValueError):
        return str(value)


@dataclass
class PgBench:
    """The cluster and what the corpus needs of it."""

    cluster: PgCluster

    def schema_of(self, checkout: Path) -> str:
        digest = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()
        return f"bench_{digest[:12]}"

    def env(self, checkout: Path) -> dict[str, str]:
        return {SCHEMA_ENV: self.schema_of(checkout)}

    def retarget(self, project: Path, dest: Path) -> Path:
        """A copy of the base project whose profile's target is this cluster."""
        shutil.copytree(project, dest, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
        profiles_file = dest / "profiles.yml"
        profiles = yaml.safe_load(profiles_file.read_text(encoding="utf-8"))
        for profile in profiles.values():
            target = profile["target"]
            threads = profile["outputs"][target].get("threads", 1)
            profile["outputs"][target] = {
                "type": "postgres", "host": self.cluster.host, "port": self.cluster.port,
                "user": self.cluster.user, "password": "", "dbname": "postgres",
                "schema": "{{ env_var('" + SCHEMA_ENV + "') }}", "threads": threads,
            }  # fmt: skip
        profiles_file.write_text(yaml.safe_dump(profiles, sort_keys=False), encoding="utf-8")
        return dest

    def _schemas(self, checkout: Path) -> list[str]:
        """The checkout's schema and dbt's `<schema>_<custom>` ones, as they exist."""
        schema = self.schema_of(checkout)
        rows = self.cluster.execute(
            f"select nspname from pg_namespace where nspname = '{schema}' "
            f"or nspname like '{schema}\\_%' order by 1"
        )
        return [str(r[0]) for r in rows]

    def drop(self, checkout: Path) -> None:
        """Drop what earlier runs of the checkout built (a run from scratch starts empty)."""
        for name in self._schemas(checkout):
            self.cluster.execute(f'drop schema "{name}" cascade')

    def content_hash(self, checkout: Path) -> str:
        """A hash of what the checkout's schemas hold (relations, columns, sorted rows)."""
        digest = hashlib.sha256()
        schemas = self._schemas(checkout)
        if not schemas:
            return "absent"
        conn = self.cluster.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "select table_schema, table_name, table_type from information_schema.tables "
                    "where table_schema = any(%s) order by 1, 2",
                    (schemas,),
                )
                for schema, name, kind in cur.fetchall():
                    # the schema's name differs per checkout; what it holds is compared
                    digest.update(f"{name}:{kind}\n".encode())
                    cur.execute(f'select * from "{schema}"."{name}"')
                    columns = [d[0] for d in cur.description or []]
                    digest.update(f"{columns}\n".encode())
                    for row in sorted(repr([_plain(v) for v in r]) for r in cur.fetchall()):
                        digest.update(row.encode())
        finally:
            conn.close()
        return digest.hexdigest()

    def query(self, checkout: Path, sql: str) -> list[list[Any]] | str | None:
        """The hidden check's rows in the checkout's schema (sorted); None when the checkout
        built nothing; an error as a string."""
        if not self._schemas(checkout):
            return None
        import psycopg2

        conn = self.cluster.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'set search_path to "{self.schema_of(checkout)}"')
                cur.execute(_ORDER_BY_ALL.sub("", sql))
                rows = [[_plain(v) for v in row] for row in cur.fetchall()]
        except psycopg2.Error as exc:
            return f"error: {str(exc).strip()}"
        finally:
            conn.close()
        return sorted(rows, key=repr)

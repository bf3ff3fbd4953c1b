"""The corpus's dbt scenarios on Postgres (`patchit bench --warehouse postgres`).

One throw-away cluster (`patchit.bench.pg_server`) serves the whole run; a schema per checkout
and the judging of the user's data are `patchit.bench.corpus_wh`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from patchit.bench.corpus_wh import QueryError, SchemaBench
from patchit.bench.pg_server import PgCluster


@dataclass
class PgBench(SchemaBench):
    """The cluster and what the corpus needs of it."""

    cluster: PgCluster
    SCHEMA_ENV: ClassVar[str] = "BENCH_PG_SCHEMA"
    name: ClassVar[str] = "Postgres"

    def _output(self, schema: str) -> dict[str, Any]:
        return {"type": "postgres", "host": self.cluster.host, "port": self.cluster.port,
                "user": self.cluster.user, "password": "", "dbname": "postgres",
                "schema": schema}  # fmt: skip

    def _schema_names(self) -> list[str]:
        return [str(r[0]) for r in self.cluster.execute("select nspname from pg_namespace")]

    def _relations(self, schemas: list[str]) -> list[tuple[str, str, str]]:
        conn = self.cluster.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "select table_schema, table_name, table_type from information_schema.tables "
                    "where table_schema = any(%s) order by 1, 2",
                    (schemas,),
                )
                return [(str(s), str(n), str(k)) for s, n, k in cur.fetchall()]
        finally:
            conn.close()

    def _execute(self, sql: str) -> None:
        self.cluster.execute(sql)

    def _read(self, schema: str, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        import psycopg2

        conn = self.cluster.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"set search_path to {self._quote(schema)}")
                cur.execute(sql)
                return [d[0] for d in cur.description or []], list(cur.fetchall())
        except psycopg2.Error as exc:
            raise QueryError(str(exc).strip()) from exc
        finally:
            conn.close()

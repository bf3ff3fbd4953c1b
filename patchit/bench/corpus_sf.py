"""The corpus's dbt scenarios on Snowflake (`patchit bench --warehouse snowflake`), on the
Snowflake emulator (`patchit.bench.sf_server`: fakesnow, a throw-away server per run).

One database, `BENCH`, holds a schema per checkout (`patchit.bench.corpus_wh`); dbt-snowflake
quotes nothing, so the schemas are stored upper case. Every patchit run is given the operator's
`[sandbox] sf_role` (without one, nothing is verified on Snowflake); the emulator has no access
control, so the role is a name only there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from patchit.bench.corpus_wh import QueryError, SchemaBench
from patchit.bench.sf_server import SfServer

DATABASE = "BENCH"
SF_ROLE = "PATCHIT_SANDBOX"


@dataclass
class SfBench(SchemaBench):
    """The emulator and what the corpus needs of it."""

    server: SfServer
    SCHEMA_ENV: ClassVar[str] = "BENCH_SF_SCHEMA"
    name: ClassVar[str] = "Snowflake (emulator)"
    operator_settings: ClassVar[str] = f'[sandbox]\nsf_role = "{SF_ROLE}"\n'

    def _output(self, schema: str) -> dict[str, Any]:
        return {**self.server.profile(DATABASE, schema)}

    def _fold(self, name: str) -> str:
        return name.upper()

    def _rows(self, sql: str, schema: str | None = None) -> tuple[list[str], list[Any]]:
        conn = self.server.connect(DATABASE, schema)
        try:
            cur = conn.cursor()
            try:
                cur.execute(sql)
            except Exception as exc:  # the connector's errors: ProgrammingError and kin
                raise QueryError(str(exc).strip().splitlines()[0]) from exc
            return [d[0] for d in cur.description or []], [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()

    def _schema_names(self) -> list[str]:
        _, rows = self._rows(f"select schema_name from {DATABASE}.information_schema.schemata")
        return [str(r[0]) for r in rows]

    def _relations(self, schemas: list[str]) -> list[tuple[str, str, str]]:
        # the emulator lists views in information_schema.views only (Snowflake: in both)
        _, tables = self._rows(f"select table_schema, table_name from "
                               f"{DATABASE}.information_schema.tables")  # fmt: skip
        _, views = self._rows(f"select table_schema, table_name from "
                              f"{DATABASE}.information_schema.views")  # fmt: skip
        wanted, found = set(schemas), {(str(s), str(n)): "VIEW" for s, n in views}
        found.update({(str(s), str(n)): "BASE TABLE" for s, n in tables if (s, n) not in found})
        return sorted((s, n, k) for (s, n), k in found.items() if s in wanted)

    def _execute(self, sql: str) -> None:
        self._rows(sql)

    def _read(self, schema: str, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        return self._rows(sql, schema)

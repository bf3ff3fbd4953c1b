"""Compare relations of two Snowflake sandbox schemas: schema, row counts, checksums, sample.

The Snowflake form of `patchit.fidelity.pg_data.PgWarehouseDiff`, run inside the warehouse on
the profile's warehouse: per relation, one query per side computes the row count and, per
column, an order-independent checksum. On Snowflake that is `hash_agg(col)`; the emulator the
tests run on (fakesnow 0.12, DuckDB underneath) has no `hash_agg`, so there the checksum is
`sum(hash(col::varchar) % 4294967291)`, NULL hashed as its own value (probed once per
connection: whichever the server answers). Rows never leave the warehouse, except the bounded
sample of differing rows, from `minus` both ways with a LIMIT.

Relations are named in reports by the user's schema they stand for, as on Postgres: a relation
a run did not build is the user's relation its `--defer` read.
"""

from __future__ import annotations

from typing import Any

from patchit.errors import HarnessError
from patchit.fidelity.dbt_data import SAMPLE_ROWS, RawDiff, TableStats, format_table
from patchit.sandbox.snowflake import SfWarehouse, ident, quote

_EMULATED = "sum(hash(coalesce({col}::varchar, chr(1))) % 4294967291)"
_NATIVE = "hash_agg({col})"


class SfWarehouseDiff:
    """Relations of the `base` and `cand` sandbox schemas in one database; close() when done."""

    def __init__(self, output: dict[str, Any], base_schema: str, cand_schema: str) -> None:
        self._wh = SfWarehouse(output, purpose="the data check")
        self.db = quote(self._wh.database)
        self.user_schema = ident(str(output.get("schema") or ""))
        self.base_schema, self.cand_schema = ident(base_schema), ident(cand_schema)
        self._where: dict[tuple[str, str], tuple[str, str]] = {}
        self._checksum: str | None = None

    def close(self) -> None:
        self._wh.close()

    def __enter__(self) -> SfWarehouseDiff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def checksum(self) -> str:
        """`hash_agg` where the warehouse has it (Snowflake), else the emulator's stand-in."""
        if self._checksum is None:
            try:
                self._wh.query("select hash_agg(1)")
                self._checksum = _NATIVE
            except HarnessError:
                self._checksum = _EMULATED
        return self._checksum

    def _sides(self, schema: str) -> tuple[str, str, str]:
        schema = ident(schema)
        for prefix in (self.cand_schema, self.base_schema, self.user_schema):
            if schema == prefix or schema.startswith(f"{prefix}_"):
                suffix = schema[len(prefix) :]
                return (self.user_schema + suffix, self.base_schema + suffix,
                        self.cand_schema + suffix)  # fmt: skip
        return schema, schema, schema

    def stats(self, schema: str, name: str) -> TableStats | None:
        cols = self._wh.query(
            f"select column_name, data_type from {self.db}.information_schema.columns "
            "where table_schema = %s and table_name = %s order by ordinal_position",
            (ident(schema), ident(name)),
        )
        if not cols:
            return None
        columns = {str(c).lower(): str(t) for c, t in cols}
        sums = ", ".join(self.checksum.format(col=quote(str(c))) for c, _ in cols)
        table = f"{self.db}.{quote(ident(schema))}.{quote(ident(name))}"
        row = self._wh.query(f"select count(*), {sums} from {table}")[0]
        checksums = {c: int(v or 0) for c, v in zip(columns, row[1:], strict=True)}
        return TableStats(columns=columns, rows=int(row[0]), checksums=checksums)

    def _side(self, sandbox: str, label: str, name: str) -> tuple[str, TableStats | None]:
        stats = self.stats(sandbox, name)
        if stats is None and label != sandbox:
            user = self.stats(label, name)
            if user is not None:
                return label, user
        return sandbox, stats

    def compare(self, schema: str, name: str, base_name: str | None = None) -> RawDiff:
        label, base_schema, cand_schema = self._sides(schema)
        base_schema, base_stats = self._side(base_schema, label, base_name or name)
        cand_schema, cand_stats = self._side(cand_schema, label, name)
        self._where[(label.lower(), name)] = (base_schema, cand_schema)
        return RawDiff.of(label.lower(), name, base_stats, cand_stats)

    def sample(self, diff: RawDiff, differing: list[str], limit: int = SAMPLE_ROWS) -> str:
        """Up to `limit` rows each way that one side has and the other has not, on the
        differing columns plus a few leading ones; a text table."""
        projected = diff.projection(differing)
        if not projected:
            return ""
        cols = ", ".join(f"{quote(ident(c))}::varchar as {quote(c)}" for c in projected)
        _, base_schema, cand_schema = self._sides(diff.schema)
        base_schema, cand_schema = self._where.get((diff.schema, diff.name),
                                                   (base_schema, cand_schema))  # fmt: skip
        base_t = f"{self.db}.{quote(base_schema)}.{quote(ident(diff.name))}"
        cand_t = f"{self.db}.{quote(cand_schema)}.{quote(ident(diff.name))}"
        order = ", ".join(str(i) for i in range(1, len(projected) + 2))
        rows = self._wh.query(
            f"select * from (select 'baseline' as side, * from (select {cols} from {base_t} "
            f"minus select {cols} from {cand_t}) limit {limit}) union all "
            f"select * from (select 'candidate' as side, * from (select {cols} from {cand_t} "
            f"minus select {cols} from {base_t}) limit {limit}) order by {order}"
        )
        return format_table(["side", *projected], rows)

"""Compare relations of two Postgres sandbox schemas: schema, row counts, checksums, sample.

The Postgres form of `patchit.fidelity.dbt_data.WarehouseDiff`, run inside the server in
read-only transactions: per relation, one query per side computes the row count and, per
column, an order-independent checksum (the sum of `hashtext(col::text)`, NULL hashed as its
own value). Rows never leave the server, except the bounded sample of differing rows, which
comes from `EXCEPT ALL` both ways with a LIMIT.

Each run built its relations into its own sandbox schema (`patchit_<hex>`, or dbt's
`patchit_<hex>_<custom>`). A relation is named in reports by the user's schema it stands for
(`analytics`, `analytics_marts`): the part after the sandbox schema is kept. A relation a run
did not build is the user's relation it read through `--defer`, as a DuckDB copy holds it.
"""

from __future__ import annotations

from typing import Any

from patchit.fidelity.dbt_data import SAMPLE_ROWS, RawDiff, TableStats, format_table, quote
from patchit.sandbox.postgres import PgWarehouse


class PgWarehouseDiff:
    """Relations of the `base` and `cand` sandbox schemas in one database; close() when done."""

    def __init__(self, output: dict[str, Any], base_schema: str, cand_schema: str) -> None:
        self._wh = PgWarehouse(output)
        self.user_schema = str(output.get("schema") or "public")
        self.base_schema, self.cand_schema = base_schema, cand_schema
        self._where: dict[tuple[str, str], tuple[str, str]] = {}  # where compare() found each

    def close(self) -> None:
        self._wh.close()

    def __enter__(self) -> PgWarehouseDiff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _suffix(self, schema: str) -> str:
        """What follows the sandbox (or user) schema: "" or dbt's `_<custom>`."""
        for prefix in (self.cand_schema, self.base_schema, self.user_schema):
            if schema == prefix or schema.startswith(f"{prefix}_"):
                return schema[len(prefix) :]
        return schema  # not derived from the target's schema: compared as named

    def _sides(self, schema: str) -> tuple[str, str, str]:
        """(label schema, base schema, candidate schema) of the relation `schema` names."""
        suffix = self._suffix(schema)
        if suffix and not suffix.startswith("_"):
            return suffix, suffix, suffix
        return self.user_schema + suffix, self.base_schema + suffix, self.cand_schema + suffix

    def stats(self, schema: str, name: str) -> TableStats | None:
        cols = self._wh.query(
            "select column_name, data_type from information_schema.columns "
            "where table_schema = %s and table_name = %s order by ordinal_position",
            (schema, name),
        )
        if not cols:
            return None
        columns = {str(c): str(t) for c, t in cols}
        sums = ", ".join(
            f"sum(hashtext(coalesce({quote(c)}::text, chr(1)))::bigint)" for c in columns
        )
        row = self._wh.query(f"select count(*), {sums} from {quote(schema)}.{quote(name)}")[0]
        checksums = {c: int(v or 0) for c, v in zip(columns, row[1:], strict=True)}
        return TableStats(columns=columns, rows=int(row[0]), checksums=checksums)

    def _side(self, sandbox: str, label: str, name: str) -> tuple[str, TableStats | None]:
        """A run's relation: in its sandbox schema when it built it, else the user's relation
        its `--defer` read (as a DuckDB copy holds the user's relations the run did not build)."""
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
        self._where[(label, name)] = (base_schema, cand_schema)
        return RawDiff.of(label, name, base_stats, cand_stats)

    def sample(self, diff: RawDiff, differing: list[str], limit: int = SAMPLE_ROWS) -> str:
        """Up to `limit` rows each way that one side has and the other has not, on the
        differing columns plus a few leading ones for context; a text table."""
        projected = diff.projection(differing)
        if not projected:
            return ""
        cols = ", ".join(f"{quote(c)}::text as {quote(c)}" for c in projected)
        _, base_schema, cand_schema = self._sides(diff.schema)
        base_schema, cand_schema = self._where.get(
            (diff.schema, diff.name), (base_schema, cand_schema)
        )
        base_t = f"{quote(base_schema)}.{quote(diff.name)}"
        cand_t = f"{quote(cand_schema)}.{quote(diff.name)}"
        order = ", ".join(str(i) for i in range(1, len(projected) + 2))
        rows = self._wh.query(
            f"(select 'baseline' as side, * from (select {cols} from {base_t} except all "
            f"select {cols} from {cand_t}) b order by {order} limit {limit}) union all "
            f"(select 'candidate' as side, * from (select {cols} from {cand_t} except all "
            f"select {cols} from {base_t}) c order by {order} limit {limit}) order by {order}"
        )
        return format_table(["side", *projected], rows)

"""Compare relations of two DuckDB files in the warehouse: schema, row counts, checksums, sample.

Both files are ATTACHed read-only to one in-memory DuckDB, shared by the process's checks.
Per relation, one query per side computes the row count and, per column, an order-independent
checksum: the sum of `hash(CAST(col AS VARCHAR))` over all rows (a sum, not a XOR, so duplicate
rows do not cancel). Rows are never pulled into Python, except the bounded sample of differing
rows, which comes from `EXCEPT ALL` both ways with a LIMIT.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchit.errors import HarnessError

SAMPLE_ROWS = 5
SAMPLE_CONTEXT_COLUMNS = 3
CELL_MAX_CHARS = 40


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass
class TableStats:
    """One side of a relation: its columns (name -> type, in order), rows and checksums."""

    columns: dict[str, str]
    rows: int
    checksums: dict[str, int]


@dataclass
class RawDiff:
    """How a relation differs between baseline and candidate, before any verdict."""

    schema: str
    name: str
    base: TableStats | None
    cand: TableStats | None
    differing: list[str] = field(default_factory=list)
    schema_changes: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # new column -> the old it equals

    @property
    def label(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def differs(self) -> bool:
        if self.base is None or self.cand is None:
            return self.base is not self.cand
        return bool(self.differing or self.schema_changes) or self.base.rows != self.cand.rows

    @classmethod
    def of(
        cls, schema: str, name: str, base: TableStats | None, cand: TableStats | None
    ) -> RawDiff:
        """The two sides' stats compared: schema changes and the columns whose checksums differ."""
        diff = cls(schema, name, base, cand)
        if base is None or cand is None:
            return diff
        for col, typ in base.columns.items():
            if col not in cand.columns:
                diff.schema_changes.append(f"-{col} {typ}")
            elif cand.columns[col] != typ:
                diff.schema_changes.append(f"~{col} {typ} -> {cand.columns[col]}")
        diff.schema_changes += [
            f"+{c} {t}" for c, t in cand.columns.items() if c not in base.columns
        ]
        diff.differing = [
            c for c in base.columns if c in cand.columns and base.checksums[c] != cand.checksums[c]
        ]
        diff.renamed = _same_values(base, cand)
        return diff

    def projection(self, differing: list[str]) -> list[str]:
        """The columns a sample shows: a few leading common ones for context, then the
        differing ones; [] when there is nothing to sample."""
        if self.base is None or self.cand is None or not differing:
            return []
        common = [c for c in self.base.columns if c in self.cand.columns]
        context = [c for c in common if c not in differing][:SAMPLE_CONTEXT_COLUMNS]
        return context + [c for c in common if c in differing]

    def columns(self) -> set[str]:
        cols: set[str] = set()
        for side in (self.base, self.cand):
            if side is not None:
                cols.update(side.columns)
        return cols


def _same_values(base: TableStats, cand: TableStats) -> dict[str, str]:
    """{new: old} for each column only the candidate has that holds, with the same type, the
    very values of one column only the baseline has, each the other's only such match: a
    column renamed, compared with its old self rather than judged new."""
    gone = {c: (t, base.checksums.get(c)) for c, t in base.columns.items() if c not in cand.columns}
    came = {c: (t, cand.checksums.get(c)) for c, t in cand.columns.items() if c not in base.columns}
    pairs = {new: [old for old, side in gone.items() if side == was] for new, was in came.items()}
    found = {}
    for new, olds in pairs.items():
        if len(olds) == 1 and [n for n, o in pairs.items() if olds[0] in o] == [new]:
            found[new] = olds[0]
    return found


@dataclass
class _Entry:
    """A file attached to the shared instance: its alias, the file's version when attached,
    and how many checks read it (0: its DETACH failed, and it is still attached)."""

    alias: str
    version: tuple[object, ...]
    readers: int = 0


# One in-memory DuckDB serves every data check of the process: making an instance costs about
# 9 ms, more than comparing the example project's relations. Each check gets a cursor of its
# own; the files it reads are attached to the instance (see `_Attached`).
_SHARED_LOCK = threading.Lock()
_shared: Any = None
_aliases = itertools.count()
_ATTACHED: dict[str, _Entry] = {}  # by the file's resolved path
# Stats by (file version, schema, name): a baseline's relations are read once per incident,
# in the baseline's own thread (`precompute_stats`), while a candidate is being verified
_STATS: OrderedDict[tuple[object, ...], TableStats | None] = OrderedDict()
_STATS_MAX = 512


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - dbt-duckdb brings duckdb
        raise HarnessError("the data check needs duckdb: pip install 'patchit[dbt]'") from exc
    return duckdb


def _instance() -> Any:
    global _shared
    duckdb = _duckdb()
    with _SHARED_LOCK:
        if _shared is None:
            _shared = duckdb.connect(":memory:")
        return _shared


def _version(path: Path) -> tuple[object, ...]:
    """The file and its WAL as they are now: stats read before a change are not reused."""
    parts: list[object] = [str(path.resolve())]
    for part in (path, path.with_name(path.name + ".wal")):
        try:
            stat = part.stat()
        except OSError:
            parts.append(None)
        else:
            parts.append((stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(parts)


class _Attached:
    """One DuckDB file attached read-only to the shared instance. A file is attached once,
    under one alias, however many checks read it at once (older DuckDB refuses a second
    attach of a file), and detached when the last of them is done."""

    def __init__(self, con: Any, path: Path, what: str) -> None:
        if not path.is_file():
            raise HarnessError(f"{path}: the {what} database for the data check is missing")
        self.version = _version(path)
        self._key: str | None = str(path.resolve())
        self._con = con
        with _SHARED_LOCK:
            entry = _ATTACHED.get(self._key)
            if entry is not None and entry.readers == 0 and entry.version != self.version:
                _run(_shared, f"DETACH {entry.alias}")  # an older version of the file
                del _ATTACHED[self._key]
                entry = None
            if entry is None:
                alias = f"{what}_{next(_aliases)}"
                _run(_shared, f"ATTACH {_literal(self._key)} AS {alias} (READ_ONLY)")
                entry = _ATTACHED[self._key] = _Entry(alias, self.version)
            entry.readers += 1
        self.alias = entry.alias

    def stats(self, schema: str, name: str) -> TableStats | None:
        """Columns, row count and per-column checksums; None if the relation is absent."""
        key = (self.version, schema, name)
        with _SHARED_LOCK:
            if key in _STATS:
                _STATS.move_to_end(key)
                return _STATS[key]
        found = self._read(schema, name)
        with _SHARED_LOCK:
            _STATS[key] = found
            while len(_STATS) > _STATS_MAX:
                _STATS.popitem(last=False)
        return found

    def _read(self, schema: str, name: str) -> TableStats | None:
        cols = _run(
            self._con,
            "select column_name, data_type from duckdb_columns() "
            "where database_name = ? and schema_name = ? and table_name = ? "
            "order by column_index",
            [self.alias, schema, name],
        )
        if not cols:
            return None
        columns = {str(c): str(t) for c, t in cols}
        sums = ", ".join(f"sum(hash(CAST({quote(c)} AS VARCHAR)))" for c in columns)
        table = f"{self.alias}.{quote(schema)}.{quote(name)}"
        row = _run(self._con, f"select count(*), {sums} from {table}")[0]
        checksums = {c: int(v or 0) for c, v in zip(columns, row[1:], strict=True)}
        return TableStats(columns=columns, rows=int(row[0]), checksums=checksums)

    def detach(self) -> None:
        """This reader is done; the file is detached when no other reads it."""
        key, self._key = self._key, None
        with _SHARED_LOCK:
            entry = _ATTACHED.get(key) if key is not None else None
            if entry is None:
                return
            entry.readers -= 1
            if entry.readers <= 0:
                with contextlib.suppress(HarnessError):  # else kept: still attached
                    _run(_shared, f"DETACH {entry.alias}")
                    del _ATTACHED[str(key)]


def _run(con: Any, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """Run one statement; a DuckDB error becomes a HarnessError."""
    try:
        rows: list[tuple[Any, ...]] = con.execute(sql, params or []).fetchall()
    except _duckdb().Error as exc:
        raise HarnessError(f"the data check's query failed: {exc}") from exc
    return rows


def precompute_stats(db: Path, relations: Iterable[tuple[str, str]]) -> None:
    """Read the stats of `db`'s `relations` (schema, name) now and keep them for the checks
    that compare with `db`: the baseline's, read in the baseline's own thread while the
    first candidate is verified. Nothing is said when it fails: the check reads again."""
    with contextlib.suppress(HarnessError):
        con = _instance().cursor()
        try:
            side = _Attached(con, db, "base")
            try:
                for schema, name in relations:
                    side.stats(schema, name)
            finally:
                side.detach()
        finally:
            con.close()


class WarehouseDiff:
    """`base` and `cand` attached read-only to the shared instance; close() when done."""

    def __init__(self, base_db: Path, cand_db: Path) -> None:
        self._con: Any = _instance().cursor()
        self._sides: list[_Attached] = []
        try:
            self._sides.append(_Attached(self._con, base_db, "base"))
            self._sides.append(_Attached(self._con, cand_db, "cand"))
        except BaseException:
            self.close()
            raise
        self.base, self.cand = self._sides

    def _query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return _run(self._con, sql, params)

    def close(self) -> None:
        for side in self._sides:
            side.detach()
        self._sides = []
        self._con.close()

    def __enter__(self) -> WarehouseDiff:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def compare(self, schema: str, name: str, base_name: str | None = None) -> RawDiff:
        """`name` in both runs (the baseline's `base_name` where the change renamed it)."""
        base = self.base.stats(schema, base_name or name)
        return RawDiff.of(schema, name, base, self.cand.stats(schema, name))

    def sample(self, diff: RawDiff, differing: list[str], limit: int = SAMPLE_ROWS) -> str:
        """Up to `limit` rows each way that one side has and the other has not, projected on
        the differing columns plus a few leading ones for context; a text table."""
        projected = diff.projection(differing)
        if not projected:
            return ""
        cols = ", ".join(f"CAST({quote(c)} AS VARCHAR) AS {quote(c)}" for c in projected)
        relation = f"{quote(diff.schema)}.{quote(diff.name)}"
        base_t, cand_t = f"{self.base.alias}.{relation}", f"{self.cand.alias}.{relation}"
        rows = self._query(
            f"select * from (select 'baseline' as side, * from (select {cols} from {base_t} "
            f"except all select {cols} from {cand_t}) order by all limit {limit}) "
            f"union all select * from (select 'candidate' as side, * from (select {cols} "
            f"from {cand_t} except all select {cols} from {base_t}) order by all limit {limit}) "
            "order by all"
        )
        return format_table(["side", *projected], rows)


def format_table(header: list[str], rows: list[tuple[Any, ...]]) -> str:
    """A fixed-width text table (cells clipped), for reports."""

    def cell(value: Any) -> str:
        text = "NULL" if value is None else str(value)
        return text if len(text) <= CELL_MAX_CHARS else text[: CELL_MAX_CHARS - 1] + "…"

    table = [header, *[[cell(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join(
        " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in table
    )

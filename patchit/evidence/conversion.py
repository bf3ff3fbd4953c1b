"""Which column holds the value a conversion error names, and a few of its offending values.

`Could not convert string 'n/a' to INT32` (DuckDB), `invalid literal for int() with base 10:
'n/a'` (Python): the message names a value and a type, never the column. Two places can say
which column it is, both read-only: the relations the failing model reads, in the copy of the
warehouse taken after the run (DuckDB), and the data files the breaking change edited (a
seed or landing CSV, whose added rows hold the value).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import TYPE_CHECKING

from patchit.evidence.gitlog import split_diff
from patchit.evidence.model import ConversionFinding, Evidence, Relation

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

MAX_SAMPLES = 5
_MAX_VALUE_CHARS = 80
_MESSAGES = (
    (re.compile(r"Could not convert string ['\"]([^'\"\n]*)['\"] to '?([A-Z][A-Z0-9_]*)"), None),
    (re.compile(r"invalid date field format: ['\"]([^'\"\n]*)['\"]"), "DATE"),
    (re.compile(r"date field value out of range: ['\"]([^'\"\n]*)['\"]"), "DATE"),
    (re.compile(r"invalid timestamp field format: ['\"]([^'\"\n]*)['\"]"), "TIMESTAMP"),
    (re.compile(r"invalid literal for int\(\) with base \d+: ['\"]([^'\"\n]*)['\"]"), "INTEGER"),
    (re.compile(r"could not convert string to float: ['\"]([^'\"\n]*)['\"]"), "DOUBLE"),
    (re.compile(r"time data ['\"]([^'\"\n]*)['\"] does not match format"), "DATE"),
    (re.compile(r"Invalid isoformat string: ['\"]([^'\"\n]*)['\"]"), "DATE"),
)
# DuckDB's messages name its physical types; try_cast wants the SQL names.
_SQL_TYPES = {"INT8": "TINYINT", "INT16": "SMALLINT", "INT32": "INTEGER", "INT64": "BIGINT",
              "INT128": "HUGEINT", "UINT8": "UTINYINT", "UINT16": "USMALLINT",
              "UINT32": "UINTEGER", "UINT64": "UBIGINT", "FLOAT": "FLOAT",
              "DOUBLE": "DOUBLE"}  # fmt: skip


def conversion_value(text: str) -> tuple[str, str] | None:
    """(value, SQL type) named by a conversion error, or None."""
    for pattern, fixed in _MESSAGES:
        if match := pattern.search(text):
            kind = fixed or _SQL_TYPES.get(match.group(2), match.group(2))
            return match.group(1)[:_MAX_VALUE_CHARS], kind
    return None


def find_conversion(
    evidence: Evidence, repo_root: Path, db: Path | None
) -> ConversionFinding | None:
    """The column that holds the value, from the changed data files first, then from the
    warehouse copy; None when the error is no conversion error or nothing holds the value."""
    text = "\n".join(t for t in (evidence.error, evidence.event.error_message) if t)
    named = conversion_value(text)
    if named is None:
        return None
    value, kind = named
    found = _in_data_files(evidence, repo_root, value, kind)
    if db is not None:
        in_db = _in_warehouse(evidence.upstream, db, value, kind)
        if in_db is not None and found is not None:
            # the warehouse names the type the column took; the file, that the change did it
            return in_db.model_copy(
                update={"changed": True, "relation": (f"{in_db.relation} (from {found.relation})")}
            )
        found = found or in_db
    return found


def _fits(value: str, kind: str) -> bool:
    """Whether a text value converts to `kind` (Python's idea of the common types)."""
    text = value.strip()
    try:
        if kind in ("DATE", "TIMESTAMP"):
            return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}([ T][\d:.]+)?", text))
        if "INT" in kind:
            int(text)
        else:
            float(text)
    except ValueError:
        return False
    return True


def _in_data_files(
    evidence: Evidence, repo_root: Path, value: str, kind: str
) -> ConversionFinding | None:
    """A column of a changed CSV file whose added rows hold `value`."""
    for path, part in split_diff(evidence.breaking_diff).items():
        if not path.lower().endswith((".csv", ".tsv")):
            continue
        try:
            head = (repo_root / path).read_text(encoding="utf-8").splitlines()[:1]
        except (OSError, UnicodeDecodeError):
            continue
        delimiter = "\t" if path.lower().endswith(".tsv") else ","
        header = next(csv.reader(head, delimiter=delimiter), [])
        added = [ln[1:] for ln in part.splitlines() if ln.startswith("+") and not
                 ln.startswith("+++")]  # fmt: skip
        rows = [r for r in csv.reader(added, delimiter=delimiter) if r != header]
        for index, column in enumerate(header):
            cells = [r[index] for r in rows if index < len(r)]
            if value in cells:
                bad = [c for c in dict.fromkeys(cells) if not _fits(c, kind)]
                return ConversionFinding(
                    value=value, target_type=kind, column=column, relation=path,
                    samples=bad[:MAX_SAMPLES], changed=True,
                )  # fmt: skip
    return None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _in_warehouse(
    upstream: list[Relation], db: Path, value: str, kind: str
) -> ConversionFinding | None:
    """The first column of an upstream relation (in the read-only copy) holding `value`."""
    try:
        import duckdb
    except ImportError:
        return None
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            for rel in upstream:
                for column in rel.columns if rel.relation else []:
                    found = _column_holding(con, rel.relation or "", column, value, kind)
                    if found is not None:
                        return found
    except duckdb.Error:
        return None  # the copy does not open: the data files may still say
    return None


def _column_holding(
    con: DuckDBPyConnection, relation: str, column: str, value: str, kind: str
) -> ConversionFinding | None:
    """The finding for `relation.column` if it holds `value`; a view that cannot be read (it
    casts the very value) is skipped."""
    import duckdb

    table = ".".join(_quote(p) for p in relation.split("."))
    col = _quote(column)
    try:
        hit = con.execute(
            f"select 1 from {table} where cast({col} as varchar) = ? limit 1", [value]
        ).fetchone()
    except duckdb.Error:
        return None
    if hit is None:
        return None
    return ConversionFinding(
        value=value, target_type=kind, column=column, relation=relation,
        column_type=_column_type(con, relation, column),
        samples=_samples(con, table, col, kind) or [value],
    )  # fmt: skip


def _samples(con: DuckDBPyConnection, table: str, col: str, kind: str) -> list[str]:
    import duckdb

    try:
        rows = con.execute(
            f"select distinct cast({col} as varchar) from {table} where {col} is not null"
            f" and try_cast({col} as {kind}) is null order by 1 limit {MAX_SAMPLES}"
        ).fetchall()
    except duckdb.Error:
        return []
    return [str(r[0])[:_MAX_VALUE_CHARS] for r in rows]


def _column_type(con: DuckDBPyConnection, relation: str, column: str) -> str | None:
    import duckdb

    catalog, schema, table = [*relation.split("."), "", "", ""][:3]
    try:
        row = con.execute(
            "select data_type from information_schema.columns where table_catalog = ? and "
            "table_schema = ? and table_name = ? and column_name = ?",
            [catalog, schema, table, column],
        ).fetchone()
    except duckdb.Error:
        return None
    return str(row[0]) if row else None

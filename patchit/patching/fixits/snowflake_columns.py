"""Snowflake's column errors, read as the DuckDB binder errors the column fix-it knows.

Snowflake names a column it cannot bind without candidates, upper-cased as it resolves
unquoted names (`invalid identifier 'AMONT'`, `invalid identifier 'O.STAUTS'`); the emulator
the tests run on (fakesnow) says it in DuckDB's words, upper-cased too (`Binder Error:
Referenced column "AMONT" not found in FROM clause!` / `Candidate bindings: "AMOUNT", ...`).
The SQL spells them `amont` and `o.stauts`: an unquoted name is the same name in any case.

So the message gets a DuckDB binder line in the SQL's own spelling, with the candidates in it:
the emulator's list, or for Snowflake's `invalid identifier` the columns of the relations the
name can come from (the manifest's and the catalog's, `column_sources.alias_columns`), in the
SQL's case when it writes the name in lower case. The column fix-it then follows it to the one
near name as on DuckDB, under the same near-name review.
"""

from __future__ import annotations

import re

from patchit.evidence.model import Evidence
from patchit.patching.fixits.column_sources import alias_columns

# Snowflake's error code and SQLSTATE, which dbt-snowflake (and the emulator) put first
SNOWFLAKE_CODE = re.compile(r"\b\d{6} \([0-9A-Z]{5}\):")
_INVALID = re.compile(r"invalid identifier '(?:\"?(?P<qual>[^'\".]+)\"?\.)?\"?(?P<col>[^'\"]+)\"?'")
_REFERENCED = re.compile(r'Referenced column "(?P<col>[^"]+)" not found in FROM clause!')
_QUALIFIED = re.compile(r'Table "(?P<qual>[^"]+)" does not have a column named "(?P<col>[^"]+)"')
_BINDINGS = re.compile(r"(Candidate bindings:)(?P<list>[^\n]*)")


def spelled(sql: str, name: str) -> str:
    """`name` as the SQL writes it (an unquoted name in any case), else as given."""
    found = re.search(rf'(?<![\w"]){re.escape(name)}(?![\w"])', sql, re.IGNORECASE)
    return found.group(0) if found else name


def _cased(names: list[str], lower: bool) -> list[str]:
    return list(dict.fromkeys(n.lower() if lower else n for n in names))


def in_sql_case(evidence: Evidence, lower: bool) -> Evidence:
    """`evidence` with its upstream columns in lower case when the SQL writes the failing name
    so and Snowflake stored them upper-cased (unquoted: the same names)."""
    if not lower:
        return evidence
    upstream = [
        r.model_copy(update={"columns": [c.lower() if c == c.upper() else c for c in r.columns]})
        for r in evidence.upstream
    ]
    return evidence.model_copy(update={"upstream": upstream})


def as_duckdb(evidence: Evidence, message: str, sql: str) -> tuple[Evidence, str]:
    """`message` with a DuckDB binder line (and its candidates) in the SQL's spelling when it
    is Snowflake's, and `evidence` whose upstream columns are in that case; both unchanged
    otherwise."""
    if not SNOWFLAKE_CODE.search(message):
        return evidence, message
    if found := _INVALID.search(message):
        col = spelled(sql, found.group("col"))
        qual = spelled(sql, found.group("qual")) if found.group("qual") else None
        evidence = in_sql_case(evidence, col == col.lower())
        pool = alias_columns(evidence, sql, qual, col).columns
        head = (f'Table "{qual}" does not have a column named "{col}"' if qual
                else f'Referenced column "{col}" not found in FROM clause!')  # fmt: skip
        listed = ", ".join(f'"{c}"' for c in pool)
        return evidence, f"{message}\nBinder Error: {head}\nCandidate bindings: {listed}"
    found = _REFERENCED.search(message) or _QUALIFIED.search(message)
    if found is None or "Binder Error" not in message:
        return evidence, message
    col = spelled(sql, found.group("col"))
    lower = col == col.lower()
    evidence = in_sql_case(evidence, lower)
    message = message.replace(f'"{found.group("col")}"', f'"{col}"', 1)
    if "qual" in found.groupdict():
        qual = found.group("qual")
        message = message.replace(f'Table "{qual}"', f'Table "{spelled(sql, qual)}"', 1)

    def recase(m: re.Match[str]) -> str:
        names = _cased(re.findall(r'"([^"]+)"', m.group("list")), lower)
        return m.group(1) + " " + ", ".join(f'"{n}"' for n in names)

    return evidence, _BINDINGS.sub(recase, message, count=1)

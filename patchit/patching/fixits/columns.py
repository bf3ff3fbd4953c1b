"""DuckDB binder errors and Postgres "column does not exist" on a misspelt column or table
qualifier -> rename to the near name.

The DuckDB 2.0 messages dbt 1.11 reports (in run_results and the log):

    Binder Error: Referenced column "stauts" not found in FROM clause!
    Candidate bindings: "status", "amount"
    Binder Error: Table "p" does not have a column named "amout"
    Candidate bindings: : "amount"
    Binder Error: Values list "o" does not have a column named "nme"      (no candidates)
    Binder Error: Referenced table "x" not found!
    Candidate tables: "o"

Postgres (dbt-postgres 1.10, PostgreSQL 15) names the column, qualified as written, and hints
at the nearest one it has when there is a single one:

    column "amont" does not exist
    HINT:  Perhaps you meant to reference the column "orders.amount".
    column o.stauts does not exist
    HINT:  Perhaps you meant to reference the column "o.status".

The HINT is the candidate (an unqualified name stays unqualified); with no HINT, or one naming
two columns, the near-name search below applies as it does for DuckDB. Snowflake's `invalid
identifier 'X'` (and its emulator's upper-cased binder errors) are first read as DuckDB's in the
SQL's own spelling (`snowflake_columns`).

Candidates are the binder's own list plus the columns the qualifier really has: the alias is
resolved in the compiled SQL (sqlglot, through CTEs and subqueries, see column_sources) to
its relations, whose columns come from the warehouse snapshot. When one of those relations is
a model that now selects `old as new` (an upstream rename), `new` is the fix, and a bare
select item keeps its output name (`subscriptions.plan_id as plan_code`): the model's own
columns, and whatever reads them, stay as they were.
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import (
    blank_regions,
    error_text,
    read_repo_file,
    sub_in_regions,
)
from patchit.patching.fixits.column_sources import alias_columns, is_projection, upstream_rename
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.fixits.snowflake_columns import SNOWFLAKE_CODE, as_duckdb

_UNQUALIFIED = re.compile(r'Referenced column "(?P<col>[^"]+)" not found in FROM clause!')
_QUALIFIED = re.compile(
    r'(?:Table|Values list) "(?P<qual>[^"]+)" does not have a column named "(?P<col>[^"]+)"'
)
_TABLE = re.compile(r'Referenced table "(?P<qual>[^"]+)" not found!')
_BINDINGS = re.compile(r"Candidate (?:bindings|tables):(?P<list>[^\n]*)")
_QUOTED = re.compile(r'"([^"]+)"')
_PG_COLUMN = re.compile(
    r'column (?:"(?P<col>[^"]+)"|(?P<qual>[^\s".]+)\.(?P<qcol>[^\s"]+)) does not exist'
)
_PG_HINT = re.compile(
    r'HINT:\s+Perhaps you meant to reference the column "(?P<ref>[^"]+)"(?P<more> or the column)?'
)
_NEAR_PG = "the only near column of the relations it reads"
_START, _END = "\x00", "\x01"  # mark a renamed span until the projection check has run


def _pg_hint(message: str) -> tuple[str, str] | None:
    """(qualifier, column) Postgres's HINT names, when it names exactly one column."""
    found = _PG_HINT.search(message)
    if found is None or found.group("more") or "." not in found.group("ref"):
        return None
    qual, _, col = found.group("ref").rpartition(".")
    return qual, col


def _listed_candidates(message: str) -> list[str]:
    found = _BINDINGS.search(message)
    return _QUOTED.findall(found.group("list")) if found else []


class RenameColumnStrategy(FixIt):
    """Rename a misspelt column (or table qualifier) to the one near name DuckDB can bind, or
    to the column Postgres's HINT names."""

    name: ClassVar[str] = "duckdb_rename_column"
    tag: ClassVar[str] = "rename_column"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        if SNOWFLAKE_CODE.search(message) and evidence.unit_path is not None:
            sql = read_repo_file(evidence, evidence.unit_path)  # Snowflake's: in the SQL's case
            if sql is not None:
                evidence, message = as_duckdb(evidence, message, sql)
        postgres = _PG_COLUMN.search(message)
        if ("Binder Error" not in message and postgres is None) or evidence.unit_path is None:
            return []
        text = read_repo_file(evidence, evidence.unit_path)
        if text is None:
            return []
        if "Binder Error" not in message and postgres is not None:
            return self._postgres(evidence, text, postgres, message)
        if found := _TABLE.search(message):
            return self._rename_qualifier(evidence, text, found.group("qual"), message)
        if found := _QUALIFIED.search(message):
            qual, col = found.group("qual"), found.group("col")
            return self._rename_qualified(evidence, text, qual, col, _listed_candidates(message))
        if found := _UNQUALIFIED.search(message):
            return self._rename_unqualified(evidence, text, found.group("col"), message)
        return []

    def _postgres(
        self, evidence: Evidence, text: str, found: re.Match[str], message: str
    ) -> list[PatchCandidate]:
        hint = _pg_hint(message)
        qual, col = found.group("qual"), found.group("qcol")
        if qual is not None:
            hinted = [hint[1]] if hint is not None and hint[0] == qual else []
            return self._rename_qualified(evidence, text, qual, col, hinted, "Postgres")
        col = found.group("col")
        pattern = rf'(?<![\w."])(?P<q>"?){re.escape(col)}(?![\w])'
        if hint is not None:
            # the HINT qualifies the name with its relation; the SQL named it bare
            basis = f"the column Postgres's HINT names ({hint[0]}.{hint[1]})"
            pool = alias_columns(evidence, text, None, col).columns
            return self._candidate(evidence, text, pattern, col, hint[1], "", None, basis, pool)
        pool = alias_columns(evidence, text, None, col).columns
        fix = nearest(col, pool)
        return self._candidate(evidence, text, pattern, col, fix, "", None, _NEAR_PG, pool)

    def _rename_qualified(
        self,
        evidence: Evidence,
        text: str,
        qual: str,
        col: str,
        listed: list[str],
        engine: str = "DuckDB",
    ) -> list[PatchCandidate]:
        source = alias_columns(evidence, text, qual, col)
        pattern = (
            rf'(?<![\w."])(?P<q>"?{re.escape(qual)}"?\s*\.\s*"?){re.escape(col)}(?P<e>"?)(?!\w)'
        )
        renamed = upstream_rename(evidence, source.tables, col, source.columns)
        if renamed is not None:
            model, new = renamed
            why = f"{qual} reads {model}, which now selects {col} as {new}"
            return self._candidate(
                evidence, text, pattern, col, new, f"{qual}.", why, engine=engine
            )
        if engine == "Postgres":
            pool = [*listed, *source.columns]
            if listed:
                basis = f"the column Postgres's HINT names ({qual}.{listed[0]})"
                return self._candidate(
                    evidence, text, pattern, col, listed[0], f"{qual}.", None, basis, pool
                )
            fix = nearest(col, source.columns)
            return self._candidate(
                evidence, text, pattern, col, fix, f"{qual}.", None, _NEAR_PG, pool
            )
        pool = [*listed, *source.columns]
        fix = nearest(col, pool)
        return self._candidate(evidence, text, pattern, col, fix, f"{qual}.", pool=pool)

    def _rename_unqualified(
        self, evidence: Evidence, text: str, col: str, message: str
    ) -> list[PatchCandidate]:
        # The binder qualifies a name present in several relations ("o.order_id"); compare on
        # the bare name and refuse when one bare name stands for several qualified forms.
        forms: dict[str, set[str]] = {}
        for listed in _listed_candidates(message):
            forms.setdefault(listed.rsplit(".", 1)[-1], set()).add(listed)
        for column in alias_columns(evidence, text, None, col).columns:
            forms.setdefault(column, {column})
        bare = nearest(col, forms)
        if bare is None or len(forms[bare]) != 1:
            return []
        pattern = rf'(?<![\w."])(?P<q>"?){re.escape(col)}(?![\w])'
        fix = next(iter(forms[bare]))
        return self._candidate(evidence, text, pattern, col, fix, "", pool=list(forms))

    def _rename_qualifier(
        self, evidence: Evidence, text: str, qual: str, message: str
    ) -> list[PatchCandidate]:
        listed = _listed_candidates(message)
        fix = nearest(qual, listed)
        pattern = rf'(?<![\w."])(?P<q>"?){re.escape(qual)}(?="?\s*\.)'
        return self._candidate(evidence, text, pattern, qual, fix, "", pool=listed, kind="table")

    def _candidate(
        self,
        evidence: Evidence,
        text: str,
        pattern: str,
        old: str,
        fix: str | None,
        shown: str,
        renamed_upstream: str | None = None,
        basis: str | None = None,
        pool: list[str] | None = None,
        kind: str = "column",
        engine: str = "DuckDB",
    ) -> list[PatchCandidate]:
        """basis: why `fix` is the column (Postgres); None: DuckDB's binder can bind it.
        pool: the names `fix` was chosen from, for the near-name review (None: `fix` is no
        guess, it follows an upstream rename)."""
        if fix is None or evidence.unit_path is None:
            return []
        start, end = (_START, _END) if renamed_upstream else ("", "")

        def repl(match: re.Match[str]) -> str:
            prefix = match.group("q")
            if prefix.endswith('"') and "." in fix:
                # a quoted bare name becomes qualifier."name", keeping the quotes on the column
                qualifier, column = fix.rsplit(".", 1)
                return f'{start}{prefix[:-1]}{qualifier}."{column}{end}'
            return f"{start}{prefix}{fix}{match.groupdict().get('e') or ''}{end}"

        new_text, count = sub_in_regions(text, re.compile(pattern), repl, region="sql")
        if renamed_upstream:
            new_text = _keep_output_names(new_text, old)
        if count == 0 or new_text == text:
            return []
        bare = fix.rsplit(".", 1)[-1]
        review = (
            ""
            if pool is None
            else near_name_review(evidence, [evidence.unit_path], old, bare, pool, kind)
        )
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=[derive_edit(evidence.unit_path, text, new_text)],
                rationale=(
                    f"{engine} could not bind {shown}{old}; {renamed_upstream}: read {fix} as "
                    f"{old} ({count} occurrence(s) in {evidence.unit_path})"
                    if renamed_upstream
                    else f"Postgres has no column {shown}{old}; {fix} is {basis} (renamed "
                    f"{count} occurrence(s) in {evidence.unit_path})"
                    if basis
                    else f"DuckDB could not bind {shown}{old}; {fix} is the only near name it "
                    f"can bind (renamed {count} occurrence(s) in {evidence.unit_path})"
                ),
                confidence=0.9,
                review=review,
            )
        ]


def _keep_output_names(text: str, old: str) -> str:
    """Drop the span markers; a marked span that is a whole select item gets `as old`."""
    out: list[str] = []
    pos = 0
    for match in re.finditer(f"{_START}([^{_END}]*){_END}", text):
        out.append(text[pos : match.start()])
        masked = blank_regions(text.replace(_START, " ").replace(_END, " "))
        whole = is_projection(masked, match.start(), match.end())
        name = old if re.fullmatch(r"[a-z_][a-z0-9_]*", old) else f'"{old}"'
        out.append(match.group(1) + (f" as {name}" if whole else ""))
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)

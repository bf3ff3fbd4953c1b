"""DuckDB binder errors on a misspelt column or table qualifier -> rename to the near name.

The DuckDB 2.0 messages dbt 1.11 reports (in run_results and the log):

    Binder Error: Referenced column "stauts" not found in FROM clause!
    Candidate bindings: "status", "amount"
    Binder Error: Table "p" does not have a column named "amout"
    Candidate bindings: : "amount"
    Binder Error: Values list "o" does not have a column named "nme"      (no candidates)
    Binder Error: Referenced table "x" not found!
    Candidate tables: "o"

Candidates are the binder's own list plus the upstream relations' columns (the binder lists
at most five), narrowed to the aliased relation when the qualifier names a ref().
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, read_repo_file, sub_in_regions

_UNQUALIFIED = re.compile(r'Referenced column "(?P<col>[^"]+)" not found in FROM clause!')
_QUALIFIED = re.compile(
    r'(?:Table|Values list) "(?P<qual>[^"]+)" does not have a column named "(?P<col>[^"]+)"'
)
_TABLE = re.compile(r'Referenced table "(?P<qual>[^"]+)" not found!')
_BINDINGS = re.compile(r"Candidate (?:bindings|tables):(?P<list>[^\n]*)")
_QUOTED = re.compile(r'"([^"]+)"')
_REF_ALIAS = r"ref\(\s*['\"](?P<ref>\w+)['\"]\s*\)\s*\}\}\s*(?:as\s+)?"


def _listed_candidates(message: str) -> list[str]:
    found = _BINDINGS.search(message)
    return _QUOTED.findall(found.group("list")) if found else []


class RenameColumnStrategy(FixIt):
    """Rename a misspelt column (or table qualifier) to the one near name DuckDB can bind."""

    name: ClassVar[str] = "duckdb_rename_column"
    tag: ClassVar[str] = "rename_column"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        if "Binder Error" not in message or evidence.unit_path is None:
            return []
        text = read_repo_file(evidence, evidence.unit_path)
        if text is None:
            return []
        if found := _TABLE.search(message):
            return self._rename_qualifier(evidence, text, found.group("qual"), message)
        if found := _QUALIFIED.search(message):
            qual, col = found.group("qual"), found.group("col")
            columns = self._upstream_columns(evidence, text, qual)
            fix = nearest(col, [*_listed_candidates(message), *columns])
            pattern = rf'(?<![\w."])(?P<q>"?{re.escape(qual)}"?\s*\.\s*"?){re.escape(col)}(?!\w)'
            return self._candidate(evidence, text, pattern, col, fix, f"{qual}.")
        if found := _UNQUALIFIED.search(message):
            return self._rename_unqualified(evidence, text, found.group("col"), message)
        return []

    def _upstream_columns(self, evidence: Evidence, text: str, alias: str | None) -> list[str]:
        relations = evidence.upstream
        if alias is not None:
            refs = {
                m.group("ref") for m in re.finditer(_REF_ALIAS + re.escape(alias) + r"\b", text)
            }
            aliased = [r for r in relations if r.name in refs]
            relations = aliased or relations
        return [column for relation in relations for column in relation.columns]

    def _rename_unqualified(
        self, evidence: Evidence, text: str, col: str, message: str
    ) -> list[PatchCandidate]:
        # The binder qualifies a name present in several relations ("o.order_id"); compare on
        # the bare name and refuse when one bare name stands for several qualified forms.
        forms: dict[str, set[str]] = {}
        for listed in _listed_candidates(message):
            forms.setdefault(listed.rsplit(".", 1)[-1], set()).add(listed)
        for column in self._upstream_columns(evidence, text, None):
            forms.setdefault(column, {column})
        bare = nearest(col, forms)
        if bare is None or len(forms[bare]) != 1:
            return []
        pattern = rf'(?<![\w."])(?P<q>"?){re.escape(col)}(?![\w])'
        fix = next(iter(forms[bare]))
        return self._candidate(evidence, text, pattern, col, fix, "")

    def _rename_qualifier(
        self, evidence: Evidence, text: str, qual: str, message: str
    ) -> list[PatchCandidate]:
        fix = nearest(qual, _listed_candidates(message))
        pattern = rf'(?<![\w."])(?P<q>"?){re.escape(qual)}(?="?\s*\.)'
        return self._candidate(evidence, text, pattern, qual, fix, "")

    def _candidate(
        self, evidence: Evidence, text: str, pattern: str, old: str, fix: str | None, shown: str
    ) -> list[PatchCandidate]:
        if fix is None or evidence.unit_path is None:
            return []

        def repl(match: re.Match[str]) -> str:
            prefix = match.group("q")
            if prefix.endswith('"') and "." in fix:
                # a quoted bare name becomes qualifier."name", keeping the quotes on the column
                qualifier, column = fix.rsplit(".", 1)
                return f'{prefix[:-1]}{qualifier}."{column}'
            return prefix + fix

        new_text, count = sub_in_regions(text, re.compile(pattern), repl, region="sql")
        if count == 0 or new_text == text:
            return []
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=[derive_edit(evidence.unit_path, text, new_text)],
                rationale=(
                    f"DuckDB could not bind {shown}{old}; {fix} is the only near name it can "
                    f"bind (renamed {count} occurrence(s) in {evidence.unit_path})"
                ),
                confidence=0.9,
            )
        ]

"""Follow a CTE the change renamed to the references it left behind.

A commit renames `customer_payments as (` to `payments_by_customer as (` and the join that
reads it, but not `customer_payments.total_amount` in the select list (tried on
dbt-labs/jaffle_shop_duckdb). The engines name the old CTE only:

    Binder Error: Referenced table "customer_payments" not found!      (DuckDB, a qualifier)
    Catalog Error: Table with name customer_payments does not exist!   (DuckDB, a bare table)
    missing FROM-clause entry for table "customer_payments"            (Postgres)
    relation "customer_payments" does not exist                        (Postgres)
    invalid identifier 'CUSTOMER_PAYMENTS.TOTAL_AMOUNT'                (Snowflake)

Putting the old name back undoes the rename (a partial revert: "reverts your change: renamed
CTE ..."). The fix completes it: in the failing model's own file, where the change renamed
that CTE (an intent of the change), every table reference to the old name and every column
qualified by it reads the new name. Only parsed SQL is rewritten (never Jinja, strings or
comments), and nothing is when the old name is still a CTE or alias of the file.
"""

from __future__ import annotations

import re
from typing import ClassVar

from sqlglot import exp

from patchit.evidence.intents import change_intents
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, read_repo_file
from patchit.patching.fixits._sqlscope import read_sql
from patchit.patching.fixits.cte_names import MISSING_TABLE

_MISSING = (
    *MISSING_TABLE,  # a bare table reference
    re.compile(r'Referenced table "(?P<name>\w+)" not found'),  # qualifiers
    re.compile(r'missing FROM-clause entry for table "(?P<name>\w+)"'),
    re.compile(r"invalid identifier '(?P<name>\w+)\.\w+'"),
)


class FollowCteRenameStrategy(FixIt):
    """The old name of a CTE the change renamed, read as the new one where it is left."""

    name: ClassVar[str] = "sql_follow_cte_rename"
    tag: ClassVar[str] = "follow_cte_rename"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        found = next((m for p in _MISSING if (m := p.search(message))), None)
        path = evidence.unit_path
        if found is None or path is None or not path.endswith(".sql"):
            return []
        old = found.group("name").lower()
        renames = [
            i for i in change_intents(evidence)
            if i.kind == "cte_renamed" and i.path == path and i.old.lower() == old
        ]  # fmt: skip
        text = read_repo_file(evidence, path)
        if len(renames) != 1 or text is None:
            return []
        rename = renames[0]
        after = follow_cte(text, rename.old, rename.new)
        if after is None:
            return []
        why = (
            f"the change renamed the CTE {rename.old} to {rename.new} in {path} and left "
            f"references to {rename.old}: they read {rename.new}, the rename kept"
        )
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=[derive_edit(path, text, after)],
                rationale=why,
                confidence=0.9,
            )
        ]


def follow_cte(text: str, old: str, new: str) -> str | None:
    """`text` with every table reference to `old`, and every column qualified by `old`,
    reading `new`; None when it does not parse, `new` is no CTE of it, `old` still is a CTE or
    an alias, or nothing reads `old`."""
    reading = read_sql(text)
    if reading is None:
        return None
    names = {c.alias.lower() for c in reading.tree.find_all(exp.CTE) if c.alias}
    aliases = {t.alias.lower() for t in reading.tree.find_all(exp.Table) if t.alias}
    if new.lower() not in names or old.lower() in names | aliases:
        return None
    spans: list[tuple[int, int]] = []
    for table in reading.tree.find_all(exp.Table):
        if table.name.lower() == old.lower() and not table.args.get("db"):
            spans += _span(table.this)
    for column in reading.tree.find_all(exp.Column):
        qualifier = column.args.get("table")
        if isinstance(qualifier, exp.Identifier) and not column.args.get("db"):
            spans += _span(qualifier) if qualifier.name.lower() == old.lower() else []
    if not spans:
        return None
    for start, end in sorted(set(spans), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _span(node: exp.Expr) -> list[tuple[int, int]]:
    start, end = node.meta.get("start"), node.meta.get("end")
    return [] if start is None or end is None else [(start, end + 1)]

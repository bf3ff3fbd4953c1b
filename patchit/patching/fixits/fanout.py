"""A join the breaking change added fans out the model's rows -> join it once per key.

A `unique` test fails, and the change added to the model (or to a model it reads) a join whose
other side has several rows per key: `left join subscriptions as account_plans on
account_plans.account_id = accounts.account_id` doubles the invoices of an account with two
subscriptions. Reverting the join drops what the change was for (its new columns). Joined once
per key instead, with the columns the change takes from it listed (their distinct values, in
order, as text), the model keeps its grain and the change its columns:

    left join (
        select account_id,
            string_agg(distinct cast(plan_code as varchar), ', '
                order by cast(plan_code as varchar)) as plan_code
        from subscriptions
        group by account_id
    ) as account_plans on account_plans.account_id = accounts.account_id

Only where nothing else can change meaning: the join line is one the change added, whole on
one line (`[inner|left [outer]] join <relation> [as] <alias> on <equalities>`), its relation a
name or one `ref`/`source` call; every equality is between a column of the joined alias and a
column of another alias; and every other use of the alias in the file is a select-list item
(`alias.col [as name],`) that the change added as well, so only new columns change (to a list
of text). The SQL is DuckDB's and Postgres's (`string_agg(distinct ... order by ...)`).
"""

from __future__ import annotations

import re
from typing import ClassVar

from patchit.evidence.gitlog import added_lines
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import blank_regions, read_repo_file

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_JOIN = re.compile(
    rf"^(?P<indent>[ \t]*)(?P<kind>(?:(?:inner|left(?:[ \t]+outer)?)[ \t]+)?join)[ \t]+"
    rf"(?P<rel>\{{\{{[ \t]*(?:ref|source)\([^{{}}()]*\)[ \t]*\}}\}}|{_IDENT}(?:\.{_IDENT})?)"
    rf"(?:[ \t]+(?:as[ \t]+)?(?P<alias>{_IDENT}))?[ \t]+on[ \t]+(?P<cond>[^\n]+?)[ \t]*$",
    re.IGNORECASE,
)
_EQUALITY = re.compile(rf"^\(?\s*({_IDENT})\.({_IDENT})\s*=\s*({_IDENT})\.({_IDENT})\s*\)?$")
_KEYWORDS = {"on", "using", "where", "join", "left", "inner", "group", "order", "limit"}


def _keys(cond: str, alias: str) -> list[str] | None:
    """The joined alias's columns in `cond`, when it is only equalities of one of its columns
    with another alias's column; else None."""
    keys: list[str] = []
    for part in re.split(r"\s+and\s+", cond.strip(), flags=re.IGNORECASE):
        found = _EQUALITY.match(part.strip())
        if found is None:
            return None
        left, lcol, right, rcol = found.groups()
        if left.lower() == alias.lower() and right.lower() != alias.lower():
            keys.append(lcol)
        elif right.lower() == alias.lower() and left.lower() != alias.lower():
            keys.append(rcol)
        else:
            return None
    return list(dict.fromkeys(keys)) or None


def _listed(column: str) -> str:
    text = f"cast({column} as varchar)"
    return f"string_agg(distinct {text}, ', ' order by {text}) as {column}"


def rewrite(text: str, new_lines: set[int]) -> tuple[str, str] | None:
    """`text` with its one added fanning join joined once per key, and what was joined; None
    when no join fits (see the module's conditions). `new_lines`: the numbers (from 1) of the
    lines the change added."""
    lines = text.splitlines(keepends=True)
    scan = blank_regions(text).splitlines(keepends=True)
    fits: list[tuple[int, re.Match[str], list[str], list[str]]] = []
    for number, line in enumerate(lines):
        found = _JOIN.match(line.rstrip("\r\n"))
        if found is None or number + 1 not in new_lines:
            continue
        alias = found["alias"] or found["rel"]
        if not re.fullmatch(_IDENT, alias) or alias.lower() in _KEYWORDS:
            continue
        keys = _keys(found["cond"], alias)
        if keys is None:
            continue
        listed = _uses(scan, lines, number, alias, keys, new_lines)
        if listed is not None:
            fits.append((number, found, keys, listed))
    if len(fits) != 1:  # none, or two joins that could each be the fan-out
        return None
    number, found, keys, listed = fits[0]
    pad = found["indent"]
    alias = found["alias"] or found["rel"]
    picked = ", ".join([*keys, *(_listed(c) for c in listed)])
    eol = "\r\n" if lines[number].endswith("\r\n") else "\n"
    joined = (
        f"{pad}{found['kind']} ({eol}"
        f"{pad}    select {picked}{eol}"
        f"{pad}    from {found['rel']}{eol}"
        f"{pad}    group by {', '.join(keys)}{eol}"
        f"{pad}) as {alias} on {found['cond']}{eol}"
    )
    after = "".join([*lines[:number], joined, *lines[number + 1 :]])
    return after, f"{found['rel']} as {alias} by {', '.join(keys)}"


def _uses(
    scan: list[str], lines: list[str], join_at: int, alias: str, keys: list[str],
    new_lines: set[int],
) -> list[str] | None:  # fmt: skip
    """The non-key columns the file takes from `alias`, when every use (but the join's) is a
    select-list item the change added; else None."""
    use = re.compile(rf"(?<![\w.]){re.escape(alias)}\.({_IDENT})", re.IGNORECASE)
    item = re.compile(
        rf"^\s*{re.escape(alias)}\.({_IDENT})(?:\s+as\s+{_IDENT})?\s*,?\s*$", re.IGNORECASE
    )
    listed: list[str] = []
    for number, line in enumerate(scan):
        if number == join_at or not use.search(line):
            continue
        found = item.match(lines[number])
        if found is None or number + 1 not in new_lines:
            return None  # used in an expression, a filter, or by code the change did not add
        if found[1] not in keys and found[1] not in listed:
            listed.append(found[1])
    return listed


class FanoutJoinStrategy(FixIt):
    """Join once per key the relation an added join fans out, listing its new columns."""

    name: ClassVar[str] = "dbt_fanout_join"
    tag: ClassVar[str] = "fanout_join"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        if evidence.test_kind != "unique" or not evidence.breaking_diff:
            return []
        added = added_lines(evidence.breaking_diff)
        paths = sorted(p for p in added if p.endswith(".sql"))
        tested = evidence.tested_model_path
        if tested in paths:  # the tested model first: its own join is the likeliest
            paths.remove(tested)
            paths.insert(0, tested)
        candidates: list[PatchCandidate] = []
        for path in paths:
            before = read_repo_file(evidence, path)
            if before is None:
                continue
            done = rewrite(before, added[path])
            if done is None:
                continue
            after, what = done
            candidates.append(
                PatchCandidate(
                    strategy=self.name,
                    tag=self.tag,
                    tier=self.tier,
                    edits=[derive_edit(path, before, after)],
                    rationale=(
                        f"unique test {evidence.unit_name or ''} fails: the join of {what} "
                        f"that the change added to {path} has several rows per key; joined "
                        "once per key, the columns the change takes from it listed (distinct "
                        "values, as text), the model keeps its grain and the change its columns"
                    ),
                )
            )
        return candidates

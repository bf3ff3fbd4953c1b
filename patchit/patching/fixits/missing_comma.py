"""Complete new code: the comma a new or rewritten select item left out.

A commit appends `sum(tax_usd) as tax_usd` under `count(*) as paid_invoices` and forgets the
comma on the line above, or rewrites a select line and drops its trailing comma; DuckDB stops
at the next item (`Parser Error: syntax error at or near "sum"`), Postgres alike (`syntax
error at or near "sum"`), Snowflake too (`syntax error line 12 at position 4 unexpected 'sum'`).
A partial revert would drop the new column or the rewrite; the fix is the comma, and the new
column stays.

The comma goes at the end of the code of a line (before a trailing comment) when: the next
code line starts with the token the parser stopped at (or with a Jinja expression, whose
compiled text the error shows); one of the two lines was written by the change; and with the
comma the file parses (sqlglot, Jinja masked). Exactly one such line, or no candidate.

Without the comma a new item's first word can read as an alias of the item above (`status`
then `order_date >= '2018-03-01' as is_recent` is `status order_date >= ...`), so the parser
stops at the item's second token: that is the token looked for when the first is a word.
"""

from __future__ import annotations

import itertools
import re
from typing import ClassVar

from patchit.classify.snowflake_errors import SF_EMULATOR_PARSE
from patchit.evidence.model import Evidence
from patchit.evidence.sql_parse import mask_jinja, parse
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._change import rewrite_candidate, sql_unit_change
from patchit.patching.fixits._common import blank_regions, error_text

# DuckDB and Postgres; Snowflake (`syntax error line 2 at position 4 unexpected 'sum'.`); the
# Snowflake emulator's parser, which names no token (`001003 (42000): Expecting ). Line 2, Col:
# 7.`): there the comma must still be the one place that makes the file parse
_NEAR = re.compile(
    r"syntax error at or near \"(?P<token>[^\"]+)\""
    r"|syntax error line \d+ at position \d+ unexpected '(?P<sf_token>[^'\n]+)'"
    r"|(?P<emulator>" + SF_EMULATOR_PARSE + ")"
)
_TOKEN = re.compile(r"\w+|[<>!=]=|<>|\|\||::|\S")
# a line ending so cannot take a comma: the statement goes on (or the line is a clause)
_OPEN_END = re.compile(
    r"(?:[,(+\-*/=<>|]|\b(?:select|distinct|and|or|not|as|on|by|from|where|when|then|else|"
    r"case|in|is|like|between|join|having|with|over|partition|union|all))\s*$",
    re.IGNORECASE,
)
_CLAUSE = re.compile(
    r"\s*(?:from|where|group|order|having|limit|qualify|window|union|except|intersect|join|"
    r"left|right|inner|full|cross|on|and|or|as|when|then|else|end|\))\b",
    re.IGNORECASE,
)


class MissingCommaStrategy(FixIt):
    """Add the comma a new select item left out, keeping the item."""

    name: ClassVar[str] = "sql_add_missing_comma"
    tag: ClassVar[str] = "missing_comma"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        found = _NEAR.search(error_text(evidence))
        change = sql_unit_change(evidence) if found is not None else None
        if found is None or change is None:
            return []
        token = found.group("token") or found.group("sf_token")
        fixed = add_comma(change.now, token, change.written)
        if fixed is None:
            return []
        text, line = fixed
        stopped = f"at {token!r}" if token is not None else "(no token named)"
        why = (
            f"the parser stopped {stopped}, the item after {change.path}:"
            f"{line}, which the change wrote without the comma that separates select items: "
            "added the comma, the item kept"
        )
        return rewrite_candidate(self, change, text, why, confidence=0.9)


def add_comma(text: str, token: str | None, written: frozenset[int]) -> tuple[str, int] | None:
    """(text with the one missing comma added, its 1-based line), or None when there is not
    exactly one line that fits (see the module docstring); `token` None: the parser named
    none, any next item fits."""
    raw = text.splitlines(keepends=True)
    # comments and strings blanked; Jinja kept visible, so a line ending in `%}` is seen
    masked = _blank_comments_and_strings(text).splitlines(keepends=True)
    code = [n for n, line in enumerate(masked) if line.strip()]
    fits = []
    for here, after in itertools.pairwise(code):
        if here + 1 not in written and after + 1 not in written:
            continue
        line, following = masked[here].rstrip(), masked[after]
        if _OPEN_END.search(line) or line.endswith("%}") or line.endswith("#}"):
            continue
        if _CLAUSE.match(following):
            continue
        starts_jinja = following.lstrip().startswith("{{")
        if not starts_jinja and token is not None and token.lower() not in _stop_tokens(following):
            continue
        end = len(line)
        candidate = "".join(raw[:here]) + raw[here][:end] + "," + raw[here][end:]
        candidate += "".join(raw[here + 1 :])
        if parse(mask_jinja(candidate)) is None:
            continue
        fits.append((candidate, here + 1))
    return fits[0] if len(fits) == 1 else None


def _stop_tokens(line: str) -> list[str]:
    """Where a parser stops on `line` when the item above lacks its comma: its first token, or
    its second when the first is a word (read as the alias of the item above)."""
    tokens = [t.lower() for t in _TOKEN.findall(line)[:2]]
    if len(tokens) == 2 and not re.fullmatch(r"\w+", tokens[0]):
        return tokens[:1]
    return tokens


def _blank_comments_and_strings(text: str) -> str:
    """Comments and strings blanked (same length), Jinja left as written."""
    blanked = list(blank_regions(text))
    for block in _JINJA.finditer(text):
        blanked[block.start() : block.end()] = text[block.start() : block.end()]
    return "".join(blanked)


_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)

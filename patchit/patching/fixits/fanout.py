"""A join the breaking change added fans out the model's rows -> join it once per key.

A `unique` test fails, and the change added to the model (or to a model it reads) a join whose
other side has several rows per key: `left join subscriptions as account_plans on
account_plans.account_id = accounts.account_id` doubles the invoices of an account with two
subscriptions. Reverting the join drops what the change was for (its new column). Joined once
per key instead, with the one column the change takes from it listed (its distinct values, in
order, as text), the model keeps its grain and the change its column:

    left join (
        select account_id, string_agg(distinct cast(plan_code as varchar), ', '
            order by cast(plan_code as varchar)) as plan_code
        from subscriptions
        group by account_id
    ) as account_plans on account_plans.account_id = accounts.account_id

Only where nothing that existed before can change meaning:
- the file existed before the change (not added, not renamed) and its alias for the joined
  relation appears nowhere in that version: the join and every use of it are new;
- the join is whole on one line, `[inner|left [outer]] join <relation> [as] <alias> on
  <equalities>`, its relation a name or one `ref`/`source` call, and every equality is between
  a plain column of the alias and one of another alias;
- every other mention of the alias in the file, even in a comment or Jinja, is a select-list
  item `alias.col [as name],` of the query the join is in (between its `select` and `from`, at
  its depth), which selects no bare `*` and is no `natural` join;
- each such item is whole on its line, and its output name is new: absent from the file
  before the change, named nowhere else in the file nor in another model (which would read
  a list);
- it takes at most one column besides the keys (two lists sorted apart would no longer pair
  their values), with plain lower-case names that are no SQL keywords;
- the join line is its whole clause (no join type on the line before, no condition continued
  on the next), every column the query names is qualified (an unqualified one could be the
  joined relation's), no Jinja chooses its rows (beyond `ref`/`source` after `from`/`join`),
  and the file has no quoted identifier, dollar quoting or `columns(...)`;
- the target is DuckDB or Postgres (`string_agg(distinct ... order by ...)`), or Snowflake
  (`listagg(distinct ..., ', ') within group (order by ...)`).
Lines the change added are found by comparing the two versions line by line (`\\n` only), not
from the diff's numbering.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import ClassVar

from patchit.errors import PatchitError
from patchit.evidence.gitlog import added_lines as diff_paths
from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import blank_regions, model_files, read_repo_file
from patchit.patching.renames import file_at

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_JOIN = re.compile(
    rf"^(?P<indent>[ \t]*)(?P<kind>(?:(?:inner|left(?:[ \t]+outer)?)[ \t]+)?join)[ \t]+"
    rf"(?P<rel>\{{\{{[ \t]*(?:ref|source)\([^{{}}()]*\)[ \t]*\}}\}}|{_IDENT}(?:\.{_IDENT})?)"
    rf"(?:[ \t]+(?:as[ \t]+)?(?P<alias>{_IDENT}))?[ \t]+on[ \t]+(?P<cond>[^\n]+?)[ \t]*$",
    re.IGNORECASE,
)
_EQUALITY = re.compile(rf"^\(?\s*({_IDENT})\.({_IDENT})\s*=\s*({_IDENT})\.({_IDENT})\s*\)?$")
_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")
# words that are no alias, and column names that would need quoting
_RESERVED = {
    "on", "using", "where", "join", "left", "inner", "group", "order", "limit", "select",
    "from", "as", "and", "or", "not", "natural", "cross", "full", "right", "outer", "by",
    "having", "union", "all", "user", "table", "to", "with", "case", "when", "then", "else",
    "end", "default", "desc", "asc", "distinct", "offset", "window", "qualify", "column",
    "check", "primary", "unique", "references", "null", "true", "false", "in", "for", "only",
    "is", "like", "ilike", "between", "some", "any", "array", "cast", "both", "leading",
    "trailing", "collate", "constraint", "foreign", "grant", "into", "lateral", "fetch",
    "returning", "analyse", "analyze", "authorization", "binary", "overlaps", "similar",
    "tablesample", "pivot", "unpivot", "except", "intersect", "exists", "interval", "over",
    "partition", "rows", "range", "filter", "within", "localtime", "localtimestamp",
    "current_date", "current_time", "current_timestamp", "current_user", "session_user",
    "current_role", "current_catalog", "current_schema", "placing", "variadic", "symmetric",
    "asymmetric", "deferrable", "initially", "do", "create", "semi", "anti",
    "asof", "positional",
}  # fmt: skip
# line breaks that str.splitlines honours and git does not: line numbers would disagree
_ODD_BREAKS = re.compile(r"\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_SELECT = re.compile(r"\bselect\b", re.IGNORECASE)
_WORD = re.compile(r"(?<![\w$.])([A-Za-z_][A-Za-z0-9_$]*)(?![\w$])")
# what may follow the join line: the next clause, or the end of the query
_NEXT_CLAUSE = re.compile(
    r"^\s*(?:$|\)|(?:left|inner|right|full|cross|join|where|group|order|limit|having|"
    r"qualify|window|union|except|intersect)\b)",
    re.IGNORECASE,
)
_JOIN_TAIL = re.compile(r"\b(?:right|full|outer|left|inner|cross|natural|lateral|asof|positional)"
                        r"\s*$", re.IGNORECASE)  # fmt: skip
_FROM = re.compile(r"^\s*from\b", re.IGNORECASE)


def new_line_numbers(before: str, after: str) -> set[int]:
    """The lines (from 0, split on `\\n` alone) of `after` that `before` does not have at the
    same place: what the change added or rewrote."""
    old = [line.rstrip("\r") for line in before.split("\n")]
    new = [line.rstrip("\r") for line in after.split("\n")]
    kept: set[int] = set()
    for block in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_matching_blocks():
        kept.update(range(block.b, block.b + block.size))
    return set(range(len(new))) - kept


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


def _listed(column: str, warehouse: str = "duckdb") -> str:
    text = f"cast({column} as varchar)"
    if warehouse == "snowflake":  # Snowflake's ordered list of distinct values
        return f"listagg(distinct {text}, ', ') within group (order by {text}) as {column}"
    return f"string_agg(distinct {text}, ', ' order by {text}) as {column}"


def rewrite(
    text: str, new_lines: set[int], base: str, warehouse: str = "duckdb"
) -> tuple[str, str, list[str]] | None:
    """`text` with its one added fanning join joined once per key, and what was joined; None
    when no join fits (see the module's conditions). `new_lines`: the lines (from 0, split on
    `\\n`) the change added; `base`: the file before the change; `warehouse`: the target's
    type, whose list aggregate is written."""
    if _ODD_BREAKS.search(text):
        return None
    lines = text.split("\n")
    blanked = blank_regions(text)
    scan = blanked.split("\n")
    # a quoted identifier (its apostrophe can blank real code), dollar quoting, or DuckDB's
    # columns(...) that takes columns by pattern: the scan would not see what the SQL means
    if len(scan) != len(lines) or re.search(r'["$]|\bcolumns\s*\(', blanked, re.IGNORECASE):
        return None
    fits: list[tuple[int, re.Match[str], list[str], str | None]] = []
    for number, line in enumerate(lines):
        found = _JOIN.match(line.rstrip("\r"))
        # in a comment the blanked line has no `join` where the line has it
        if found is None or number not in new_lines or found["kind"] not in scan[number]:
            continue
        if not _clause_bounds(scan, number):
            continue  # the join's type on the line before, or its condition on the next
        alias = found["alias"] or found["rel"]
        if not re.fullmatch(_IDENT, alias) or alias.lower() in _RESERVED or _mentions(base, alias):
            continue
        keys = _keys(found["cond"], alias)
        if keys is None or any(not _PLAIN.fullmatch(k) or k in _RESERVED for k in keys):
            continue
        fine, taken = _taken(scan, lines, number, alias, keys, new_lines)
        if (
            fine
            and _unqualified_ok(lines, scan, number, alias, found["rel"])
            and _new_name(lines, scan, number, alias, base)
        ):
            fits.append((number, found, keys, taken))
    if len(fits) != 1:  # none, or two joins that could each be the fan-out
        return None
    number, found, keys, taken = fits[0]
    pad, alias = found["indent"], found["alias"] or found["rel"]
    picked = ", ".join([*keys, *([_listed(taken, warehouse)] if taken else [])])
    cr = "\r" if lines[number].endswith("\r") else ""
    joined = [
        f"{pad}{found['kind']} ({cr}",
        f"{pad}    select {picked}{cr}",
        f"{pad}    from {found['rel']}{cr}",
        f"{pad}    group by {', '.join(keys)}{cr}",
        f"{pad}) as {alias} on {found['cond']}{cr}",
    ]
    after = "\n".join([*lines[:number], *joined, *lines[number + 1 :]])
    return after, f"{found['rel']} as {alias} by {', '.join(keys)}", _output_names(lines, alias)


def _mentions(text: str, alias: str) -> bool:
    """Whether `alias` appears in `text` as a word (quoted or not, any case, anywhere)."""
    return re.search(rf"(?<![\w$]){re.escape(alias)}(?![\w$])", text, re.IGNORECASE) is not None


def _taken(
    scan: list[str], lines: list[str], join_at: int, alias: str, keys: list[str],
    new_lines: set[int],
) -> tuple[bool, str | None]:  # fmt: skip
    """Whether every mention of `alias` (but the join) is an added select-list item of the
    join's query, and the one non-key column they take (None: only keys)."""
    no: tuple[bool, str | None] = (False, None)
    query = _query_span(scan, join_at)
    if query is None:
        return no
    start, end = query
    listing = "\n".join(scan[start : end + 1])
    if re.search(r"(?<![\w.\"])\*", listing) or re.search(r"\bnatural\b", "\n".join(scan), re.I):
        return no  # a bare `*` or a natural join takes columns nobody listed
    item = _item(alias)
    taken: list[str] = []
    for number, line in enumerate(lines):
        if number == join_at or not _mentions(line, alias):
            continue
        found = item.match(line.rstrip("\r"))
        if found is None or number not in new_lines or not start < number < end:
            return no
        if _depth(scan[start:number]) != 0:
            return no  # inside a call or a subquery of the select list
        if not _whole_item(scan, number, start, end):
            return no  # a line of a longer expression (`case when`, `a ||`)
        column = found[1]
        if column.casefold() in (k.casefold() for k in keys):
            if column not in keys:
                return no  # the key in another case: ambiguous beside it
            continue
        if not _PLAIN.fullmatch(column) or column in _RESERVED:
            return no
        if column not in taken:
            taken.append(column)
    if len(taken) > 1:
        return no
    return True, taken[0] if taken else None


def _prev(scan: list[str], number: int) -> str:
    """The nearest non-blank scanned line before `number` ("" for none)."""
    for line in reversed(scan[:number]):
        if line.strip():
            return line.strip()
    return ""


def _next(scan: list[str], number: int) -> str:
    for line in scan[number + 1 :]:
        if line.strip():
            return line.strip()
    return ""


def _clause_bounds(scan: list[str], join_at: int) -> bool:
    """The join line is its whole clause: no join type left on the line before it, and the
    next line starts the next clause (no `and`/`or` continuing its condition)."""
    return not _JOIN_TAIL.search(_prev(scan, join_at)) and bool(
        _NEXT_CLAUSE.match(_next(scan, join_at))
    )


def _whole_item(scan: list[str], number: int, start: int, end: int) -> bool:
    """Line `number` of the select list (`start` its `select`, `end` its `from`) is one whole
    item: the line before ends an item (`,`) or is the `select`, and it ends with `,` or is
    the last before `from`."""
    before = _prev(scan, number)
    ends = scan[number].rstrip().endswith(",")
    last = not any(line.strip() for line in scan[number + 1 : end])
    opened = re.fullmatch(r"(?i).*\bselect(?:\s+distinct)?", before) is not None
    return (before.endswith(",") or opened) and (ends or last)


def _query_end(scan: list[str], start: int) -> int:
    """The last line of the query whose `select` is on line `start`: where its parentheses
    close below it (a CTE's), else the file's last line."""
    depth = 0
    for number in range(start, len(scan)):
        depth += scan[number].count("(") - scan[number].count(")")
        if depth < 0:
            return number
    return len(scan) - 1


def _jinja_lines(lines: list[str], first: int, last: int) -> list[str]:
    """The lines `first`..`last` that hold Jinja."""
    return [line for line in lines[first : last + 1] if "{{" in line or "{%" in line]


def _unqualified_ok(lines: list[str], scan: list[str], join_at: int, alias: str, rel: str) -> bool:
    """Every column the join's query names is qualified (`x.col`): an unqualified one could be
    the joined relation's, which becomes a list (or disappears) once it is joined per key. A
    word followed by `(` is a function, one after `as` an output name; the relations and
    their aliases after `from`/`join`, and SQL's keywords, are no columns."""
    span = _query_span(scan, join_at)
    if span is None:
        return False
    start, end = span[0], _query_end(scan, span[0])
    for line in _jinja_lines(lines, span[1], end):
        if not re.fullmatch(r"(?i)\s*(?:from|\w*\s*join)\s+\{\{\s*(?:ref|source)\(.*", line):
            return False  # Jinja where the rows are chosen could name anything
    text = "\n".join(scan[start : end + 1])
    named = {alias.lower(), rel.lower()}
    for found in re.finditer(rf"\b(?:from|join)\s+({_IDENT})(?:\s+(?:as\s+)?({_IDENT}))?",
                             text, re.IGNORECASE):  # fmt: skip
        named.update(n.lower() for n in found.groups() if n)
    for found in _WORD.finditer(text):
        word, after = found[1].lower(), text[found.end() :].lstrip()
        if after.startswith((".", "(")) or word in _RESERVED or word in named:
            continue
        if re.search(r"(?i)\bas\s*$", text[: found.start()]):
            continue  # an output name
        if word.isdigit():
            continue
        return False
    return True


def _item(alias: str) -> re.Pattern[str]:
    """A select-list item taking a column from `alias`: its column, and its output name."""
    return re.compile(
        rf"^\s*{re.escape(alias)}\.({_IDENT})(?:\s+as\s+({_IDENT}))?\s*,?\s*$", re.IGNORECASE
    )


def _output_names(lines: list[str], alias: str) -> list[str]:
    item = _item(alias)
    return [m[2] or m[1] for line in lines if (m := item.match(line.rstrip("\r"))) is not None]


def _new_name(lines: list[str], scan: list[str], join_at: int, alias: str, base: str) -> bool:
    """The output name of each item taking a column from `alias` is new: absent from the file
    before the change, and named nowhere else in the file (a filter or a later CTE reading it
    would read a list)."""
    item = _item(alias)
    for number, line in enumerate(lines):
        found = item.match(line.rstrip("\r")) if number != join_at else None
        if found is None:
            continue
        name = found[2] or found[1]
        if _mentions(base, name):
            return False
        others = "\n".join(lines[:number] + lines[number + 1 :])
        if _mentions(others, name):
            return False
    return True


def _query_span(scan: list[str], join_at: int) -> tuple[int, int] | None:
    """The join's query: the line of its `select` and of its `from` (the last `from` line
    before the join, and the last `select` before that), or None."""
    froms = [n for n in range(join_at) if _FROM.match(scan[n])]
    if not froms:
        return None
    selects = [n for n in range(froms[-1]) if _SELECT.search(scan[n])]
    if not selects:
        return None
    return selects[-1], froms[-1]


def _depth(lines: list[str]) -> int:
    text = "\n".join(lines)
    return text.count("(") - text.count(")")


class FanoutJoinStrategy(FixIt):
    """Join once per key the relation an added join fans out, listing its new column."""

    name: ClassVar[str] = "dbt_fanout_join"
    tag: ClassVar[str] = "fanout_join"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        if evidence.test_kind != "unique" or not evidence.breaking_diff:
            return []
        warehouse = _warehouse(evidence)
        if not evidence.change_base or warehouse not in ("duckdb", "postgres", "snowflake"):
            return []
        paths = sorted(p for p in diff_paths(evidence.breaking_diff) if p.endswith(".sql"))
        tested = evidence.tested_model_path
        if tested in paths:  # the tested model first: its own join is the likeliest
            paths.remove(tested)
            paths.insert(0, tested)
        candidates: list[PatchCandidate] = []
        for path in paths:
            before = read_repo_file(evidence, path)
            base = _base_text(evidence, path)
            if before is None or base is None:  # a new or renamed file: nothing is known new
                continue
            done = rewrite(before, new_line_numbers(base, before), base, warehouse)
            if done is None or _read_elsewhere(evidence, path, done[2]):
                continue
            after, what, _ = done
            candidates.append(
                PatchCandidate(
                    strategy=self.name,
                    tag=self.tag,
                    tier=self.tier,
                    edits=[derive_edit(path, before, after)],
                    rationale=(
                        f"unique test {evidence.unit_name or ''} fails: the join of {what} "
                        f"that the change added to {path} has several rows per key; joined "
                        "once per key, the column the change takes from it listed (distinct "
                        "values, as text), the model keeps its grain and the change its column"
                    ),
                )
            )
        return candidates


def _read_elsewhere(evidence: Evidence, path: str, names: list[str]) -> bool:
    """Whether another model of the project names one of the columns the rewrite turns into
    a list (`names`, the items' output names): it would read a list."""
    for other in sorted(set(model_files(evidence).values()) - {path}):
        text = read_repo_file(evidence, other) or ""
        if any(_mentions(text, name) for name in names):
            return True
    return False


def _base_text(evidence: Evidence, path: str) -> str | None:
    """`path` as the change found it (at `change_base`), or None where it did not exist."""
    assert evidence.change_base is not None
    return file_at(Path(evidence.repo_root), evidence.change_base, path)


def _warehouse(evidence: Evidence) -> str:
    """The dbt target's type ("" when it cannot be read)."""
    from patchit.sandbox.dbt_profile import resolve_dbt_target

    if evidence.event.dbt is None:
        return ""
    try:
        return str(resolve_dbt_target(evidence.event).output.get("type") or "")
    except PatchitError:
        return ""

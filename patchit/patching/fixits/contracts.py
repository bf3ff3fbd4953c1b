"""A model whose enforced contract fails: the SQL made to keep the contract the author declared.

dbt compares a contracted model's columns with its YAML `columns:` before it builds and prints
what differs:

    This model has an enforced contract that failed.
    ...
    | column_name           | definition_type | contract_type | mismatch_reason    |
    | projected_renewal_ncd | INTEGER         | BIGINT        | data type mismatch |

Each row has a forward fix, and none undoes the change:
- `data type mismatch`: the column's expression is cast to the type the contract declares (the
  type as the YAML writes it). The contract is the model's promise to its consumers, so the
  SQL is fitted to it, not the other way round; the values stay the new expression's. Found
  on the public Saurabh-DS/datavault-dbt-duckdb-medallion: `least(ncd + 1, 9)` is INTEGER on
  today's DuckDB and its contract says `bigint`. When the change itself cast the column to
  another type (`cast(x as date)` on a line it wrote), the type is what the author meant: the
  contract's `data_type` follows, and the candidate is held for review (a contract change
  every consumer sees).
- `missing in contract` for a column the change added to the SQL: the column is added to the
  model's `columns:` with the type dbt read for it (a new column completed, not dropped).
Any other row (a contract column the SQL lacks: a rename or a removal, which the rename and
revert strategies read) leaves the fix-it out, as does an expression it cannot find whole on
one line of the model (`<expr> as <name>`, or a bare `<name>` item).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._change import FileChange, file_change
from patchit.patching.fixits._common import blank_regions, error_text, read_repo_file

_HEADER = "This model has an enforced contract that failed"
_ROW = re.compile(
    r"^\s*\|\s*(?P<name>[^|]*?[^|\s])\s*\|\s*(?P<defined>[^|]*?)\s*\|\s*(?P<contract>[^|]*?)\s*\|"
    r"\s*(?P<reason>data type mismatch|missing in contract|missing in definition)\s*\|\s*$",
    re.MULTILINE,
)
# a line of a clause, not a select item: `from x as name`, `left join y as name`
_CLAUSE = re.compile(
    r"(?:from|join|left|right|inner|full|cross|natural|lateral|on|using|where|group|order"
    r"|having|qualify|select|with|union|except|intersect|and|or|when|then|else)\b",
    re.IGNORECASE,
)
_TYPE = re.compile(r"^[A-Za-z][\w ]*(?:\(\s*\d+(?:\s*,\s*\d+)?\s*\))?(?:\[\])?$")


@dataclass(frozen=True)
class Mismatch:
    name: str
    defined: str
    contract: str
    reason: str


def mismatches(text: str) -> list[Mismatch]:
    """The rows of dbt's contract table in `text` (none when it is no contract failure)."""
    if _HEADER not in text:
        return []
    return [
        Mismatch(m["name"].strip('"'), m["defined"], m["contract"], m["reason"])
        for m in _ROW.finditer(text)
    ]


def _item_pattern(name: str) -> re.Pattern[str]:
    """One select item on its own line: `[,] <expr> as <name> [,]` or `[,] [q.]<name> [,]`."""
    quoted = rf'(?:"{re.escape(name)}"|{re.escape(name)})'
    return re.compile(
        rf"^(?P<lead>\s*,?\s*)(?:(?P<expr>\S.*?)\s+as\s+(?P<alias>{quoted})"
        rf"|(?P<bare>(?:\w+\.)?{quoted}))(?P<trail>\s*,?\s*)$",
        re.IGNORECASE,
    )


def _balanced(expr: str) -> bool:
    depth = 0
    for char in expr:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


@dataclass(frozen=True)
class Item:
    """The line making an output column: its 0-based number, the span of `<expr> as <alias>`
    (or of a bare column) in it, the expression and the alias as written."""

    number: int
    start: int
    end: int
    expr: str
    alias: str


def find_item(sql: str, name: str) -> Item | None:
    """The last line of `sql` that makes the output column `name` (the final select is last;
    a `select * from final` passes the CTE's line on); None when none is found or its
    expression is not whole on that line."""
    lines = sql.splitlines(keepends=True)
    code = blank_regions(sql).splitlines(keepends=True)
    pattern = _item_pattern(name)
    for number in range(len(lines) - 1, -1, -1):
        found = pattern.match(code[number].rstrip("\r\n"))
        if found is None:
            continue
        line = lines[number]
        if found["expr"] is not None:
            start, end = found.start("expr"), found.end("alias")
            expr, alias = line[start : found.end("expr")], line[found.start("alias") : end]
        else:
            start, end = found.start("bare"), found.end("bare")
            expr = line[start:end]
            alias = expr.rpartition(".")[2]
        if _CLAUSE.match(code[number][start:end]):
            continue  # `from x as name`: a relation's alias
        if not _balanced(blank_regions(expr)):
            return None
        return Item(number, start, end, expr, alias)
    return None


def _same_type(a: str, b: str) -> bool:
    return re.sub(r"\s+", "", a).lower() == re.sub(r"\s+", "", b).lower()


def cast_to(expr: str) -> str | None:
    """The type an expression is explicitly cast to as a whole (`cast(x as T)`, `x::T`)."""
    found = re.fullmatch(r"(?:try_)?cast\((?P<x>.*)\s+as\s+(?P<t>[^()]+(?:\([^()]*\))?)\s*\)",
                         expr.strip(), re.IGNORECASE | re.DOTALL)  # fmt: skip
    if found is not None and _balanced(found["x"]):
        return found["t"].strip()
    found = re.fullmatch(r"(?P<x>.*\S)\s*::\s*(?P<t>\w[\w ]*(?:\([^()]*\))?)", expr.strip())
    return found["t"].strip() if found is not None and _balanced(found["x"]) else None


def cast_column(sql: str, item: Item, to_type: str) -> str:
    """`sql` with the item's expression cast to `to_type`, under its alias."""
    lines = sql.splitlines(keepends=True)
    line = lines[item.number]
    new = f"{line[: item.start]}cast({item.expr} as {to_type}) as {item.alias}{line[item.end :]}"
    return "".join([*lines[: item.number], new, *lines[item.number + 1 :]])


@dataclass(frozen=True)
class _Columns:
    """A model's `columns:` in one properties file: the file, its text, the list, the types."""

    path: str
    text: str
    seq: CommentedSeq
    types: dict[str, str]


def model_columns(evidence: Evidence, model: str) -> _Columns | None:
    """The properties file declaring `model` with a `columns:` list, or None."""
    for path, text in evidence.properties.items():
        try:
            doc = YAML(typ="rt").load(text)
        except (YAMLError, ValueError):
            continue
        models = doc.get("models") if isinstance(doc, CommentedMap) else None
        for entry in models if isinstance(models, CommentedSeq) else []:
            if not isinstance(entry, CommentedMap) or entry.get("name") != model:
                continue
            seq = entry.get("columns")
            if not isinstance(seq, CommentedSeq) or not seq:
                return None
            types = {
                str(c.get("name")).lower(): str(c.get("data_type"))
                for c in seq
                if isinstance(c, CommentedMap) and c.get("data_type") is not None
            }
            current = read_repo_file(evidence, path)
            return _Columns(path, current, seq, types) if current == text else None
    return None


def add_columns(columns: _Columns, added: list[tuple[str, str]], text: str) -> str | None:
    """`text` (the properties, lines where `columns` read them) with `- name: <name>` and its
    `data_type` after the last column, for each of `added`."""
    lines = text.splitlines(keepends=True)
    last = columns.seq[-1]
    if not isinstance(last, CommentedMap) or "name" not in last:
        return None
    row, key_col = columns.seq.lc.item(len(columns.seq) - 1)  # where its first key starts
    col = lines[row].rfind("-", 0, key_col)  # its dash
    if col < 0 or lines[row][:col].strip():
        return None
    end = row + 1  # the last column's block: the lines indented deeper than its dash
    while end < len(lines):
        stripped = lines[end].strip()
        indent = len(lines[end]) - len(lines[end].lstrip())
        if stripped and (indent < col or (indent == col and not stripped.startswith("#"))):
            break
        end += 1
    while end > row + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines after the block stay after the new columns
    newline = "\r\n" if lines[row].endswith("\r\n") else "\n"
    if not lines[end - 1].endswith(("\n", "\r")):
        lines[end - 1] += newline
    dash = " " * col + "-" + " " * (key_col - col - 1)
    block = [
        f"{dash}name: {name}{newline}{' ' * key_col}data_type: {data_type}{newline}"
        for name, data_type in added
    ]
    return "".join([*lines[:end], *block, *lines[end:]])


_SCALAR = re.compile(r"\"[^\"]*\"|'[^']*'|[^#\r\n]*?(?=\s*(?:#|$))")


def retype_columns(columns: _Columns, types: dict[str, str]) -> str | None:
    """The properties text with the `data_type` of each column of `types` set to its type."""
    lines = columns.text.splitlines(keepends=True)
    for column in columns.seq:
        if not isinstance(column, CommentedMap) or str(column.get("name")) not in types:
            continue
        if "data_type" not in column:
            return None
        row, col = column.lc.value("data_type")
        line = lines[row]
        found = _SCALAR.match(line, col)
        if found is None or not found.group(0):
            return None
        new_type = types[str(column.get("name"))]
        lines[row] = f"{line[:col]}{new_type}{line[found.end() :]}"
    return "".join(lines)


class ContractMismatchStrategy(FixIt):
    """Fit a contracted model's SQL to its declared contract; add a new column to it."""

    name: ClassVar[str] = "dbt_contract_mismatch"
    tag: ClassVar[str] = "contract_mismatch"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        rows = mismatches(error_text(evidence))
        path, model = evidence.unit_path, evidence.unit_name
        if not rows or not path or not path.endswith(".sql") or not model:
            return []
        if any(r.reason == "missing in definition" for r in rows):
            return []  # a rename or a removal: not this fix-it's to guess
        columns = model_columns(evidence, model)
        sql = read_repo_file(evidence, path)
        if columns is None or sql is None:
            return []
        change = file_change(evidence, path)  # read once: what the change wrote in the model
        new_sql, added, retyped, said, review = sql, [], {}, [], ""
        for row in rows:
            if row.reason == "missing in contract":  # only a column the change added
                if not _wrote(change, row.name) or not _TYPE.match(row.defined):
                    return []
                added.append((row.name, row.defined.lower()))
                said.append(f"added the new column {row.name} ({row.defined.lower()}) to the "
                            "contract")  # fmt: skip
                continue
            item = find_item(new_sql, row.name)
            declared = columns.types.get(row.name.lower(), row.contract.lower())
            if item is None or not _TYPE.match(declared):
                return []
            explicit = cast_to(item.expr)
            if explicit is not None and _wrote(change, item.alias, item.number):
                if _same_type(explicit, declared) or not _TYPE.match(explicit):
                    return []  # cast as the contract says and still refused: not a cast's to fix
                retyped[row.name] = explicit  # the author cast it: the contract follows
                said.append(f"the change casts {row.name} to {explicit}: the contract's "
                            f"{declared} made {explicit}")  # fmt: skip
                review = (f"changes {model}'s enforced contract ({row.name} {declared} -> "
                          f"{explicit}): a change every consumer of the model sees")  # fmt: skip
                continue
            new_sql = cast_column(new_sql, item, declared)
            said.append(f"cast {row.name} ({row.defined}) to the contract's {declared}")
        new_yaml = retype_columns(columns, retyped) if retyped else columns.text
        if new_yaml is not None and added:
            new_yaml = add_columns(columns, added, new_yaml)
        if new_yaml is None:
            return []
        edits = []
        if new_sql != sql:
            edits.append(derive_edit(path, sql, new_sql))
        if new_yaml != columns.text:
            edits.append(derive_edit(columns.path, columns.text, new_yaml))
        if not edits:
            return []
        why = f"{model}'s enforced contract failed: " + "; ".join(said)
        return [self.candidate(edits, why, 0.8, review=review)]


def _wrote(change: FileChange | None, column: str, line: int | None = None) -> bool:
    """Whether the change wrote a line of the model that names `column` (line `line`, a
    0-based number, when given)."""
    if change is None:
        return False
    lines = change.now.splitlines()
    name = re.escape(column.strip('"'))
    word = re.compile(rf"\b{name}\b", re.IGNORECASE)
    written = change.written if line is None else change.written & {line + 1}
    return any(n <= len(lines) and word.search(lines[n - 1]) for n in written)

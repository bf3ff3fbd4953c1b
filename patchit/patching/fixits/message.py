"""Follow the message: errors that name their own fix.

    NameError: name 'totl' is not defined. Did you mean: 'total'?                  (Python 3.11)
    AttributeError: module 'csv' has no attribute 'DictReadr'. Did you mean: 'DictReader'?
    AttributeError: 'PosixPath' object has no attribute 'write_txt'. Did you mean: 'write_text'?
    Warning: `dbt_utils.surrogate_key` has been replaced by `dbt_utils.generate_surrogate_key`.
    Catalog Error: Scalar Function with name date_trnc does not exist!
    Did you mean "date_trunc"?                                                     (DuckDB)
    Catalog Error: Table with name ordrs does not exist!  Did you mean "orders"?
    function date_trnc(unknown, date) does not exist                               (Postgres)
    'cents_to_dolars' is undefined. This can happen when calling a macro ...       (dbt, Jinja)

Where the name is rewritten: in the failing unit's file, and on every line the breaking change
(the diff from the last good commit) added or rewrote that uses the old name, so a macro the
commit renamed in five models is fixed in all five. A "has been replaced by" names a removed API:
no use of it can work any more, so every call in the project is rewritten. A Python NameError
is local to one module: only the failing file is edited.

Never a guess between two near names. A suggestion is followed only when it is near the old
name and, where the names the code could mean are known (the names in scope, a module's or a
repository class's members, DuckDB's functions, the project's relations and macros), it is
one of them and no other is near at all: the tool picks the nearest by its own measure, which
is no reason to believe it (`json.dumsp` makes Python suggest `dump`; `dumps` was meant). A
replacement that is not installed here proposes nothing.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from patchit.evidence.gitlog import added_lines
from patchit.evidence.model import Evidence
from patchit.evidence.pg_columns import pg_function_names, postgres_output
from patchit.evidence.similarity import DEFAULT_MIN_RATIO, name_ratio, normalise_name
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import (
    call_pattern,
    error_text,
    project_files,
    read_repo_file,
    rewrite_jinja,
    scan_index,
    sub_in_regions,
)
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.fixits.python_common import (
    Scope,
    enclosing_scope,
    failing_frame,
    module_file,
    nodes_on_line,
    parse_python,
    read_source,
    replace_spans,
    scope_bindings,
    span_of,
    top_level_names,
)
from patchit.patching.fixits.python_names import (
    _MODULE_ATTR,
    _NAME_ERROR,
    _class_members,
    _module_names,
)

_PY_SUGGESTION = re.compile(r"Did you mean: '(?P<new>\w+)'\?")
_OBJECT_ATTR = re.compile(
    r"(?:type object|'(?P<cls>[\w.]+)' object) (?:'(?P<type>[\w.]+)' )?has no attribute "
    r"'(?P<old>\w+)'"
)
_REPLACED = re.compile(
    # a name starts a word and is taken whole (possessive): a long run of word characters is
    # one attempt, not one per position (quadratic: 16 kB took 40 s; found by the fuzz test)
    r"(?<![\w.`])`?(?P<old>[A-Za-z_][\w.]*+)`? has been replaced by "
    r"`?(?P<new>[A-Za-z_][\w.]*)`?(?:[.,;\s]|$)"
)
_DUCKDB = re.compile(
    r"(?P<what>Scalar Function|Table Function|Aggregate Function|Function|Table|View) with name "
    r'"?(?P<old>[\w.]+?)"? does not exist!\s*Did you mean "(?P<new>[^"]+)"\?'
)
# Postgres names no near function: the one near name among those the target can call is
_PG_FUNCTION = re.compile(r"\bfunction (?P<old>[A-Za-z_]\w*)\([^)\n]*\) does not exist")
_UNDEFINED = re.compile(
    r"'(?P<old>\w+)' is undefined\. This can happen when calling a macro that does not exist"
)
_SQL_SUFFIXES = (".sql",)
_KINDS = {"NameError": "name", "AttributeError": "attribute", "undefined macro": "macro",
          "DuckDB relation": "relation"}  # fmt: skip


@dataclass(frozen=True)
class _Message:
    """One error that names its fix: `old` must become `new`."""

    kind: str
    old: str
    new: str
    known: frozenset[str] | None = None  # names the code could mean; None: only the tool knew


def _refusal(msg: _Message) -> str | None:
    """Why the suggestion must not be followed, or None."""
    if msg.kind == "replaced":
        return None  # the tool states the replacement; existence is checked by the caller
    if name_ratio(msg.old, msg.new) < DEFAULT_MIN_RATIO:
        return "the suggestion is not near the name in the code"
    if msg.known is None:
        return None
    if msg.old in msg.known:
        return "the old name exists here: not a misspelling"
    if msg.new not in msg.known:
        return "the suggestion is not a name this code can use"
    same = normalise_name(msg.new)  # `date_trunc` and its alias `datetrunc` are one name
    rivals = [
        c
        for c in msg.known
        if normalise_name(c) != same and name_ratio(msg.old, c) >= DEFAULT_MIN_RATIO
    ]
    return f"ambiguous: {sorted(rivals)[0]!r} is near too" if rivals else None


def _library_names(module: str) -> frozenset[str] | None:
    """Top-level names of an installed pure-Python module, read from its source (never
    imported: the failing code's libraries must not run inside patchit)."""
    if "." in module:
        return None  # find_spec would import the parent package
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py"):
        return None
    try:
        tree = parse_python(Path(origin).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return frozenset(top_level_names(tree)) if tree is not None else None


class FollowMessageStrategy(FixIt):
    """Apply the fix an error message names, at every use the breaking change made."""

    name: ClassVar[str] = "follow_message"
    tag: ClassVar[str] = "follow_message"
    # A general strategy: asked after the targeted fix-its of tier 0 where strategies are
    # ranked (tier, rank, name); the targeted ones are rank 0.
    rank: ClassVar[int] = 1

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        message = error_text(evidence)
        if evidence.frames and _PY_SUGGESTION.search(python := _python_message(evidence)):
            return self._python(evidence, python)
        if found := _REPLACED.search(message):
            return self._replaced(evidence, found["old"].rstrip("."), found["new"].rstrip("."))
        if found := _DUCKDB.search(message):
            return self._duckdb(evidence, found)
        if found := _PG_FUNCTION.search(message):
            return self._postgres_function(evidence, found["old"])
        if found := _UNDEFINED.search(message):
            known = frozenset(scan_index(evidence).macros)
            near = [m for m in known if name_ratio(found["old"], m) >= DEFAULT_MIN_RATIO]
            if len({normalise_name(m) for m in near}) != 1:
                return []
            msg = _Message("undefined macro", found["old"], sorted(near)[0], known)
            return self._sql_rename(evidence, msg, call_pattern(msg.old), "jinja")
        return []

    # -- dbt and DuckDB ---------------------------------------------------------------------

    def _replaced(self, evidence: Evidence, old: str, new: str) -> list[PatchCandidate]:
        macros = set(scan_index(evidence).macros)
        if new.rpartition(".")[2] not in macros or old == new:
            return []  # the named replacement is not installed here: not for this code
        msg = _Message("replaced", old, new)
        pattern = call_pattern(old)
        edits = []
        for rel in project_files(evidence):
            text = read_repo_file(evidence, rel)
            if text is None or old not in text:
                continue
            after = rewrite_jinja(text, pattern, new, None)
            if after != text:
                edits.append((rel, text, after))
        return self._candidate(evidence, msg, edits, "every call in the project")

    def _duckdb(self, evidence: Evidence, found: re.Match[str]) -> list[PatchCandidate]:
        old, new = found["old"].rpartition(".")[2], found["new"].rpartition(".")[2]
        if found["what"] in ("Table", "View"):
            index = scan_index(evidence)
            names = [*index.models, *index.seeds, *index.snapshots]
            names += [t for _, t in index.sources] + [r.name for r in evidence.upstream]
            msg = _Message("DuckDB relation", old, new, frozenset(names))
            pattern = re.compile(rf'(?<![\w."]){re.escape(old)}(?![\w"])', re.IGNORECASE)
        else:
            msg = _Message("DuckDB function", old, new, _duckdb_functions())
            pattern = re.compile(rf'(?<![\w."]){re.escape(old)}(?=\s*\()', re.IGNORECASE)
        return self._sql_rename(evidence, msg, pattern, "sql")

    def _postgres_function(self, evidence: Evidence, old: str) -> list[PatchCandidate]:
        known = _postgres_functions(evidence)
        if known is None or old in known:
            return []  # unknown here, or it exists and the arguments are what is wrong
        near = [f for f in known if name_ratio(old, f) >= DEFAULT_MIN_RATIO]
        if len({normalise_name(f) for f in near}) != 1:
            return []
        msg = _Message("Postgres function", old, sorted(near)[0], known)
        pattern = re.compile(rf'(?<![\w."]){re.escape(old)}(?=\s*\()', re.IGNORECASE)
        return self._sql_rename(evidence, msg, pattern, "sql")

    def _sql_rename(
        self, evidence: Evidence, msg: _Message, pattern: re.Pattern[str], region: str
    ) -> list[PatchCandidate]:
        if _refusal(msg) is not None:
            return []
        added = added_lines(evidence.breaking_diff)
        targets: dict[str, set[int] | None] = {}
        if evidence.unit_path and evidence.unit_path.endswith(_SQL_SUFFIXES):
            targets[evidence.unit_path] = None  # the failing file: every use
        for rel, changed in added.items():
            if rel.endswith(_SQL_SUFFIXES) and changed and rel not in targets:
                targets[rel] = changed
        edits = []
        for rel, lines in targets.items():
            text = read_repo_file(evidence, rel)
            if text is None:
                continue
            if region == "jinja":
                after = rewrite_jinja(text, pattern, msg.new, lines)
            else:
                after, _ = sub_in_regions(text, pattern, lambda _m: msg.new, "sql", lines)
            if after != text:
                edits.append((rel, text, after))
        where = "the failing model and the breaking change's lines"
        return self._candidate(evidence, msg, edits, where)

    # -- Python -----------------------------------------------------------------------------

    def _python(self, evidence: Evidence, message: str) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        suggestion = _PY_SUGGESTION.search(message)
        if frame is None or suggestion is None:
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        new = suggestion["new"]
        if found := _NAME_ERROR.search(message):
            scope = enclosing_scope(tree, frame.line)
            bound = scope_bindings(scope) | top_level_names(tree) | set(dir(builtins))
            msg = _Message("NameError", found["name"], new, frozenset(bound))
            if _refusal(msg) is not None:
                return []
            after = _rename_names(text, tree, msg, _lines_for(evidence, frame.path), frame.line)
            edits = [(frame.path, text, after)] if after != text else []
            return self._candidate(evidence, msg, edits, f"{frame.path}")
        if found := _MODULE_ATTR.search(message):
            module = found["module"]
            names = _module_names(evidence, module) if module_file(evidence, module) else None
            library = _library_names(module) if names is None else None
            msg = _Message("AttributeError", found["name"], new, _frozen(names) or library)
        elif found := _OBJECT_ATTR.search(message):
            cls = (found["cls"] or found["type"] or "").rpartition(".")[2]
            members = _class_members(evidence, cls) if cls else None
            msg = _Message("AttributeError", found["old"], new, _frozen(members))
        else:
            return []
        if _refusal(msg) is not None:
            return []
        receivers = {
            ast.get_source_segment(text, n.value)
            for n in nodes_on_line(tree, frame.line)
            if isinstance(n, ast.Attribute) and n.attr == msg.old
        }
        receivers.discard(None)
        if not receivers:
            return []
        edits = []
        files = dict.fromkeys([frame.path, *added_lines(evidence.breaking_diff)])
        for rel in files:
            if not rel.endswith(".py"):
                continue
            lines = _lines_for(evidence, rel)
            if rel != frame.path and lines is None:
                continue
            own = (text, tree) if rel == frame.path else read_source(evidence, rel)
            if own is None:
                continue
            failing = frame.line if rel == frame.path else None
            after = _rename_attributes(own[0], own[1], msg, receivers, lines, failing)
            if after != own[0]:
                edits.append((rel, own[0], after))
        return self._candidate(evidence, msg, edits, "the failing line and the breaking change's")

    # -- the candidate ----------------------------------------------------------------------

    def _candidate(
        self, evidence: Evidence, msg: _Message, edits: list[tuple[str, str, str]], where: str
    ) -> list[PatchCandidate]:
        if not edits:
            return []
        if any(rel.endswith(".py") and parse_python(after) is None for rel, _, after in edits):
            return []  # an edit that does not parse is never proposed
        files = ", ".join(rel for rel, _, _ in edits)
        said = "says it was replaced by" if msg.kind == "replaced" else "suggests"
        checked = "" if msg.known is None or msg.kind == "replaced" else ", the only name as near"
        paths, pool = [rel for rel, _, _ in edits], msg.known or {msg.new}
        kind = _KINDS.get(msg.kind, "function")  # a replaced API is stated, not guessed:
        review = "" if msg.kind == "replaced" else (
            near_name_review(evidence, paths, msg.old, msg.new, pool, kind)
        )  # fmt: skip
        return [
            PatchCandidate(
                strategy=self.name,
                tag=self.tag,
                tier=self.tier,
                edits=[derive_edit(rel, before, after) for rel, before, after in edits],
                rationale=(
                    f"the {msg.kind} message {said} {msg.new!r} for {msg.old!r}{checked}; "
                    f"renamed in {where} ({files})"
                ),
                confidence=0.8,
                review=review,
            )
        ]


def _python_message(evidence: Evidence) -> str:
    """The error with Python's suggestion. `str(exc)` lacks it (the traceback printer adds
    it), so an Airflow callback's message does: then the traceback's final line has it."""
    message = error_text(evidence)
    if _PY_SUGGESTION.search(message):
        return message
    kind = evidence.event.error_type
    finals = [
        line
        for line in (evidence.event.traceback or "").splitlines()
        if kind and line.startswith(f"{kind}: ") and _PY_SUGGESTION.search(line)
    ]
    return finals[-1] if finals else message


def _frozen(names: set[str] | frozenset[str] | None) -> frozenset[str] | None:
    return frozenset(names) if names is not None else None


@functools.cache
def _duckdb_functions() -> frozenset[str] | None:
    """DuckDB's function names (an in-memory database of the installed DuckDB), once."""
    try:
        import duckdb
    except ImportError:
        return None
    with duckdb.connect() as con:
        rows = con.execute("select distinct function_name from duckdb_functions()").fetchall()
    return frozenset(str(r[0]) for r in rows)


def _postgres_functions(evidence: Evidence) -> frozenset[str] | None:
    """The functions the failing run's Postgres target can call (None: not a Postgres target,
    or its server cannot answer)."""
    output = postgres_output(evidence.event)
    return pg_function_names(output) if output is not None else None


def _lines_for(evidence: Evidence, rel: str) -> set[int] | None:
    """The lines of `rel` the breaking change added, or None when there is no breaking diff
    or it did not touch `rel`."""
    return added_lines(evidence.breaking_diff).get(rel) or None


def _rename_names(
    text: str, tree: ast.Module, msg: _Message, lines: set[int] | None, failing: int
) -> str:
    """Loads of `msg.old` that cannot resolve: on the breaking change's lines and the failing
    line, or with no breaking diff, in the failing function."""
    scope: Scope = enclosing_scope(tree, failing)
    nodes = ast.walk(tree) if lines is not None else ast.walk(scope)
    module = top_level_names(tree) | set(dir(builtins))
    spans = []
    for node in nodes:
        if not (isinstance(node, ast.Name) and node.id == msg.old):
            continue
        if not isinstance(node.ctx, ast.Load):
            continue
        if lines is not None and node.lineno not in lines and node.lineno != failing:
            continue
        if msg.old in scope_bindings(enclosing_scope(tree, node.lineno)) | module:
            continue  # resolves there: not the broken use
        spans.append((*span_of(node), msg.new))
    return replace_spans(text, spans)


def _rename_attributes(
    text: str,
    tree: ast.Module,
    msg: _Message,
    receivers: set[str | None],
    lines: set[int] | None,
    failing: int | None,
) -> str:
    """`receiver.old` -> `receiver.new` for the failing line's receivers: on the breaking
    change's lines and the failing line, or with no breaking diff, in the whole failing file."""
    spans = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == msg.old):
            continue
        if ast.get_source_segment(text, node.value) not in receivers:
            continue
        if lines is not None and node.lineno not in lines and node.lineno != failing:
            continue
        if lines is None and failing is None:
            continue
        _line, _col, end_line, end_col = span_of(node)
        spans.append((end_line, end_col - len(msg.old.encode()), end_line, end_col, msg.new))
    return replace_spans(text, spans)

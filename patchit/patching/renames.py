"""Renames the breaking change made itself, read from its diff: a file, a macro, a parameter,
a docs block, a project var.

A commit that renames `stg_invoices.sql` to `stg_billing_invoices.sql`, the macro
`cents_to_dollars` to `dollars_from_cents`, or a helper's parameter `rates` to `eur_per_unit`
and leaves a caller behind breaks that caller with an error naming only the old name. The new
name need not be near the old one by spelling; the diff says which it is. The fix-its that
follow a rename to its call sites (`dbt_fix_ref`, `dbt_fix_macro`, `python_fix_call`) ask
`breaking_renames` for the renames of the change from the project's last good commit (else the
failing commit's parent) to the failing commit.

What counts as a rename, from the files' text before and after the change:

- file: a file the change deleted and one it added with the same suffix whose contents are
  alike (difflib ratio >= `FILE_MIN_RATIO`), each the other's best match;
- macro: a Jinja macro defined before and nowhere after, paired with one defined after and
  nowhere before that has the same parameters and a like body, each the other's only match;
- parameter: a Python function (same qualified name in the same file) whose parameter list
  changed only by names at unchanged positions (`def f(a, rates)` -> `def f(a, eur_rates)`);
- function and dict key: see `patchit.evidence.py_renames` (`owner` is the class or outer
  function of a function, the function building the dict of a key).
- docs block: a `{% docs name %}` block defined before and nowhere after, paired with one
  defined after and nowhere before whose text is alike, each the other's only match;
- var: a key of `dbt_project.yml`'s `vars:` gone and one new key holding the same value.

Nothing here writes; git runs through the read-only queries of `patchit.sandbox.git`.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from patchit.errors import VcsError
from patchit.evidence import name_renames
from patchit.evidence.model import Evidence
from patchit.evidence.py_renames import function_renames, key_renames
from patchit.patching.revert import change_base
from patchit.sandbox.git import QUERY_TIMEOUT_S, run_git, show_file
from patchit.text.python_source import parse_python

RenameKind = Literal["file", "macro", "parameter", "function", "key", "docs", "var"]
FILE_MIN_RATIO = 0.6
MACRO_MIN_RATIO = 0.8
MAX_FILES = 200  # changed files read from git; a larger change is not read for renames
MAX_FILE_CHARS = 200_000
_TEXT_SUFFIXES = (".sql", ".py", ".yml", ".yaml", ".csv", ".md", ".jinja", ".j2")
_MACRO = re.compile(
    r"{%-?\s*macro\s+(?P<name>[A-Za-z_]\w*)\s*\((?P<params>[^)]*)\)\s*-?%}"
    r"(?P<body>.*?){%-?\s*endmacro\s*-?%}",
    re.DOTALL,
)


@dataclass(frozen=True)
class Rename:
    """`old` became `new`. For a file, the names are the file stems (a dbt node's name) and
    `path`/`old_path` the files; for a macro, `path` is the file defining it now; for a
    parameter, `owner` is the function's qualified name (`Class.method`) in `path`."""

    kind: RenameKind
    old: str
    new: str
    path: str
    old_path: str = ""
    owner: str = ""


@dataclass(frozen=True)
class ChangedFile:
    """One file of the change: its text before (None: added) and after (None: deleted)."""

    path: str
    before: str | None
    after: str | None


def find_renames(files: list[ChangedFile]) -> list[Rename]:
    """Every rename the change made: files, macros, parameters, Python names, docs, vars."""
    return [
        *file_renames(files), *macro_renames(files), *parameter_renames(files),
        *python_renames(files), *docs_renames(files), *var_renames(files),
    ]  # fmt: skip


# -- files ----------------------------------------------------------------------------------


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.splitlines(), b.splitlines(), autojunk=False).ratio()


def file_renames(files: list[ChangedFile]) -> list[Rename]:
    """Deleted files paired with added files of the same suffix and like content."""
    deleted = [f for f in files if f.after is None and f.before is not None]
    added = [f for f in files if f.before is None and f.after is not None]
    scores: dict[tuple[str, str], float] = {}
    for old in deleted:
        for new in added:
            if Path(old.path).suffix == Path(new.path).suffix:
                assert old.before is not None and new.after is not None
                if old.before == new.after:
                    scores[old.path, new.path] = 2.0  # identical beats any likeness
                elif (ratio := _likeness(old.before, new.after)) >= FILE_MIN_RATIO:
                    scores[old.path, new.path] = ratio
    found = []
    for (gone, came), score in sorted(scores.items()):
        best_for_old = max(s for (o, _), s in scores.items() if o == gone)
        best_for_new = max(s for (_, n), s in scores.items() if n == came)
        ties = sum(1 for (o, n), s in scores.items() if (o == gone or n == came) and s == score)
        if score == best_for_old == best_for_new and ties == 1:
            found.append(Rename("file", Path(gone).stem, Path(came).stem, came, old_path=gone))
    return found


# -- macros ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Macro:
    name: str
    params: tuple[str, ...]
    body: str
    path: str


def macros_in(text: str, path: str) -> list[_Macro]:
    """The Jinja macros `text` defines, with their parameter names and body."""
    found = []
    for match in _MACRO.finditer(text):
        params = tuple(p.split("=", 1)[0].strip() for p in match["params"].split(",") if p.strip())
        found.append(_Macro(match["name"], params, match["body"], path))
    return found


def _normalised(body: str) -> str:
    return " ".join(body.split())


def macro_renames(files: list[ChangedFile]) -> list[Rename]:
    """Macros defined before and nowhere after, paired with ones defined after and nowhere
    before that take the same parameters and have a like body."""
    before = [m for f in files if f.before is not None for m in macros_in(f.before, f.path)]
    after = [m for f in files if f.after is not None for m in macros_in(f.after, f.path)]
    names_before, names_after = {m.name for m in before}, {m.name for m in after}
    gone = [m for m in before if m.name not in names_after]
    new = [m for m in after if m.name not in names_before]

    def alike(a: _Macro, b: _Macro) -> bool:
        if a.params != b.params:
            return False
        x, y = _normalised(a.body), _normalised(b.body)
        return x == y or difflib.SequenceMatcher(None, x, y).ratio() >= MACRO_MIN_RATIO

    found = []
    for old in gone:
        matches = [n for n in new if alike(old, n)]
        if len(matches) == 1 and [o for o in gone if alike(o, matches[0])] == [old]:
            found.append(Rename("macro", old.name, matches[0].name, matches[0].path,
                                old_path=old.path))  # fmt: skip
    return found


# -- Python parameters ----------------------------------------------------------------------

Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions_in(text: str) -> dict[str, Function]:
    """Functions by qualified name (`f`, `Class.f`, `outer.inner`); a name defined twice in
    one file is left out (which one a caller reaches is not known from the text)."""
    tree = parse_python(text)
    if tree is None:
        return {}
    found: dict[str, Function] = {}
    twice: set[str] = set()

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, Function | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if isinstance(child, Function):
                    if name in found:
                        twice.add(name)
                    found[name] = child
                walk(child, f"{name}.")
            elif not isinstance(child, ast.expr):  # no definition lives in an expression,
                walk(child, prefix)  # which may nest thousands deep

    walk(tree, "")
    return {k: v for k, v in found.items() if k not in twice}


def _signature(node: Function) -> list[tuple[str, str]]:
    """(kind, name) of each parameter, in order: positional-only, ordinary, *args,
    keyword-only, **kwargs."""
    args = node.args
    params = [("posonly", a.arg) for a in args.posonlyargs] + [("arg", a.arg) for a in args.args]
    if args.vararg:
        params.append(("vararg", args.vararg.arg))
    params += [("kwonly", a.arg) for a in args.kwonlyargs]
    if args.kwarg:
        params.append(("kwarg", args.kwarg.arg))
    return params


def parameter_renames(files: list[ChangedFile]) -> list[Rename]:
    """Parameters of the same function renamed in place: same kinds at the same positions,
    old name gone from the signature, new name not in it before."""
    found = []
    for changed in files:
        if not changed.path.endswith(".py") or changed.before is None or changed.after is None:
            continue
        old_funcs, new_funcs = functions_in(changed.before), functions_in(changed.after)
        for qualname in sorted(old_funcs.keys() & new_funcs.keys()):
            old_sig, new_sig = _signature(old_funcs[qualname]), _signature(new_funcs[qualname])
            if [k for k, _ in old_sig] != [k for k, _ in new_sig]:
                continue  # parameters added or removed: not a rename of one in place
            old_names, new_names = {n for _, n in old_sig}, {n for _, n in new_sig}
            for (kind, old), (_, new) in zip(old_sig, new_sig, strict=True):
                keyword = kind in ("arg", "kwonly")  # the only ones a caller names
                if old != new and keyword and old not in new_names and new not in old_names:
                    found.append(Rename("parameter", old, new, changed.path, owner=qualname))
    return found


def python_renames(files: list[ChangedFile]) -> list[Rename]:
    """Functions and dict keys renamed in a Python file changed in place."""
    found = []
    for changed in files:
        if not changed.path.endswith(".py") or changed.before is None or changed.after is None:
            continue
        for r in [*function_renames(changed.before, changed.after),
                  *key_renames(changed.before, changed.after)]:  # fmt: skip
            kind: RenameKind = "function" if r.kind == "function" else "key"
            found.append(Rename(kind, r.old, r.new, changed.path, owner=r.owner))
    return found


# -- docs blocks and project vars (read in evidence, shared with the intents) ----------------


def _sides(files: list[ChangedFile]) -> list[tuple[str, str | None, str | None]]:
    return [(f.path, f.before, f.after) for f in files]


def docs_renames(files: list[ChangedFile]) -> list[Rename]:
    """Docs blocks defined before and nowhere after, paired with new ones of like text."""
    return [Rename("docs", old, new, path, old_path=old_path)
            for old, new, old_path, path in name_renames.docs_renames(_sides(files))]  # fmt: skip


def var_renames(files: list[ChangedFile]) -> list[Rename]:
    """Project vars renamed in `dbt_project.yml`: a key gone, one new key with its value."""
    return [Rename("var", old, new, path, old_path=path)
            for old, new, path in name_renames.var_renames(_sides(files))]  # fmt: skip


# -- reading the change from git ------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return run_git(repo, *args, timeout_s=QUERY_TIMEOUT_S)


def file_at(repo: Path, commit: str, path: str) -> str | None:
    """`path`'s text at `commit`; None where it did not exist, or is binary or too large."""
    try:
        text = show_file(repo, commit, path)  # byte for byte: CRLF line ends kept
    except VcsError:
        return None
    return None if text is None or "\x00" in text or len(text) > MAX_FILE_CHARS else text


def changed_texts(repo: Path, base: str, head: str) -> list[ChangedFile]:
    """The text files changed base..head with their contents on each side."""
    out = _git(repo, "diff", "--name-status", "--no-renames", base, head)
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line]
    files = []
    for row in rows[:MAX_FILES]:
        status, path = row[0], row[-1]
        if not path.endswith(_TEXT_SUFFIXES):
            continue
        before = None if status.startswith("A") else file_at(repo, base, path)
        after = None if status.startswith("D") else file_at(repo, head, path)
        if before is not None or after is not None:
            files.append(ChangedFile(path, before, after))
    return files


@lru_cache(maxsize=32)
def _renames_between(repo: str, base: str, head: str) -> tuple[Rename, ...]:
    return tuple(find_renames(changed_texts(Path(repo), base, head)))


def breaking_renames(evidence: Evidence) -> list[Rename]:
    """The renames of the breaking change (last good commit, else the failing commit's
    parent, to the failing commit); [] when there is no such change to read."""
    event = evidence.event
    repo = Path(event.repo_path or evidence.repo_root)
    failing = event.commit or "HEAD"
    try:
        found = change_base(repo, failing, evidence.last_good_commit)
        if found is None:
            return []
        head = _git(repo, "rev-parse", "--verify", "--quiet", f"{failing}^{{commit}}").strip()
        return list(_renames_between(str(repo.resolve()), found[0], head))
    except VcsError:
        return []

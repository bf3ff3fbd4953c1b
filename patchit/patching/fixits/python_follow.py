"""Follow a function or record-key rename of the breaking change to every Python reader.

    shop_lib/landing.py:  def read_rows(...)  ->  def read_landing(...)
    AttributeError: module 'shop_lib.landing' has no attribute 'read_rows'

    shop_lib/sales.py:    {"quantity": int(row["quantity"])}  ->  {"units": ...}
    KeyError: 'quantity'                         (units_sold still reads order["quantity"])

Putting the old name back would turn the run green and undo what the author meant; the near-
name fix-its find nothing, because the new name need not look like the old. The diff says
which it is (`patchit.evidence.py_renames`, through `patching.renames.breaking_renames`), and
the error names the old one. One candidate then edits every reader the change left behind:

- a function: in the repository's Python files, the imports of it from its module (`from m
  import old` -> `new`, and the file's uses of an un-aliased import) and the attribute reads
  through the module (`landing.read_rows` -> `landing.read_landing`, whatever alias binds
  the module), and the calls left in its own file;
- a key: the constant subscripts (`order["quantity"]`) and `.get("quantity")` reads in the
  file that builds the record (except in the function building it: what it reads is its own
  input, under its own names), in the files of the failing traceback, and in the files that
  import the building function. A configuration lookup (`os.environ[...]`) is never touched.

The candidate declares the rename it follows (`follows`), so the policy counts it as one edit
kind however many sites it reaches; the verification runs every failing task of the incident.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path, PurePosixPath
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.patching.apply import derive_edit
from patchit.patching.base import Edit, FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits._common import error_text, read_repo_file
from patchit.patching.fixits.python_common import (
    parse_python,
    replace_spans,
    segment,
    span_of,
)
from patchit.patching.fixits.python_keys import missing_key
from patchit.patching.renames import Rename, breaking_renames

MAX_FILES = 2000
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "site-packages", "__pycache__", ".tox"}
_NAME_ERRORS = ("AttributeError", "NameError", "ImportError", "ModuleNotFoundError")
Span = tuple[int, int, int, int, str]


class FollowPythonRenameStrategy(FixIt):
    """Complete a function or key rename of the change in every reader it left behind."""

    name: ClassVar[str] = "python_follow_rename"
    tag: ClassVar[str] = "follow_rename"
    # before the near-name fix-its: the diff says what the name became, a near name guesses
    rank: ClassVar[int] = -1

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        renames = [r for r in breaking_renames(evidence) if r.kind in ("function", "key")]
        if not renames:
            return []
        message = error_text(evidence)
        error_type = evidence.event.error_type.rsplit(".", 1)[-1]
        key = missing_key(evidence)
        for rename in renames:
            if rename.kind == "key" and key == rename.old:
                files = _key_files(evidence, rename)
                rewrite = _key_spans
            elif (
                rename.kind == "function" and error_type in _NAME_ERRORS
                and re.search(rf"'{re.escape(rename.old)}'", message)
            ):  # fmt: skip
                files = _python_files(evidence)
                rewrite = _function_spans
            else:
                continue
            edits: list[Edit] = []
            for path in files:
                text = read_repo_file(evidence, path)
                tree = parse_python(text) if text is not None else None
                if text is None or tree is None:
                    continue
                after = replace_spans(text, rewrite(rename, path, text, tree))
                if after != text:
                    if parse_python(after) is None:
                        return []  # an edit that does not parse is never proposed
                    edits.append(derive_edit(path, text, after))
            if not edits:
                continue
            where = ", ".join(e.path for e in edits)
            rationale = (
                f"the change renamed the {rename.kind} {rename.old!r} to {rename.new!r} "
                f"({rename.path}{f', in {rename.owner}' if rename.owner else ''}) and left "
                f"readers of the old name; followed the rename in {where}"
            )
            return [
                PatchCandidate(
                    strategy=self.name, tag=self.tag, tier=self.tier, edits=edits,
                    rationale=rationale, confidence=0.85, follows={rename.old: rename.new},
                )
            ]  # fmt: skip
        return []


def _python_files(evidence: Evidence) -> list[str]:
    """The repository's Python files (bounded; virtualenvs and hidden folders skipped)."""
    root = Path(evidence.repo_root)
    found: list[str] = []
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        here = Path(current).relative_to(root)
        found += [(here / f).as_posix() for f in sorted(files) if f.endswith(".py")]
        if len(found) > MAX_FILES:
            break
    return found[:MAX_FILES]


def module_names(path: str) -> set[str]:
    """The dotted names a file is importable by (any suffix of its path: sys.path may hold
    any folder)."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return {".".join(parts[i:]) for i in range(len(parts))}


def _function_spans(rename: Rename, path: str, text: str, tree: ast.Module) -> list[Span]:
    modules = module_names(rename.path)
    bound: set[str] = set()  # names (or dotted chains) the module is bound to in this file
    imported_bare = False  # `from module import old` without an alias: uses keep its name
    spans: list[Span] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if node.module in modules and alias.name == rename.old:
                    spans.append((*span_of(alias), _alias_text(rename.new, alias.asname)))
                    imported_bare |= alias.asname is None
                elif f"{node.module}.{alias.name}" in modules:
                    bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    bound.add(alias.asname or alias.name)
    own_file = path == rename.path and not rename.owner
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute) and node.attr == rename.old
            and segment(text, node.value) in bound
        ):  # fmt: skip
            spans.append((*span_of(node), f"{segment(text, node.value)}.{rename.new}"))
        elif (
            isinstance(node, ast.Name) and node.id == rename.old
            and isinstance(node.ctx, ast.Load) and (imported_bare or own_file)
        ):  # fmt: skip
            spans.append((*span_of(node), rename.new))
    return spans


def _alias_text(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname else name


def _key_files(evidence: Evidence, rename: Rename) -> list[str]:
    """The file building the record, the failing traceback's files, and the files that
    import the building function."""
    found = [rename.path, *(f.path for f in evidence.frames)]
    builder = rename.owner.split(".")[0]
    modules = module_names(rename.path)
    for path in _python_files(evidence):
        text = read_repo_file(evidence, path)
        tree = parse_python(text) if text is not None else None
        if tree is not None and any(
            isinstance(n, ast.ImportFrom) and n.module in modules
            and any(a.name == builder for a in n.names) for n in ast.walk(tree)
        ):  # fmt: skip
            found.append(path)
    return [p for p in dict.fromkeys(found) if p.endswith(".py")]


def _key_spans(rename: Rename, path: str, text: str, tree: ast.Module) -> list[Span]:
    skip: set[int] = set()
    if path == rename.path:  # the builder reads its own input under its own names
        builder = _function(tree, rename.owner)
        skip = {id(n) for n in ast.walk(builder)} if builder is not None else set()
    spans: list[Span] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            slice_ = node.slice
            config = "environ" in (segment(text, node.value) or "")
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and node.args
        ):  # fmt: skip
            slice_ = node.args[0]
            config = "environ" in (segment(text, node.func.value) or "")
        else:
            continue
        if isinstance(slice_, ast.Constant) and slice_.value == rename.old and not config:
            old = segment(text, slice_) or repr(rename.old)
            quote = old[0] if old[:1] in ("'", '"') else '"'
            spans.append((*span_of(slice_), f"{quote}{rename.new}{quote}"))
    return spans


def _function(tree: ast.Module, qualname: str) -> ast.AST | None:
    scope: ast.AST = tree
    for part in qualname.split("."):
        found = next((n for n in ast.iter_child_nodes(scope)
                      if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                      and n.name == part), None)  # fmt: skip
        if found is None:
            return None
        scope = found
    return scope

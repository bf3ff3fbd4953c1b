"""NameError / AttributeError / ImportError of a misspelt name -> the one near name that exists.

    NameError: name 'totl' is not defined
    AttributeError: module 'zoo_lib.helpers' has no attribute 'sumarise_orders'
    AttributeError: 'Order' object has no attribute 'amout'      (class defined in the repo)
    ImportError: cannot import name 'summarise_order' from 'zoo_lib.helpers' (/.../helpers.py)
    ModuleNotFoundError: No module named 'zoo_lib.helper'       (zoo_lib/helpers.py exists)

Candidates are the names really in scope: the function's parameters and assignments, the
module's top level and builtins for a NameError; a repository module's top-level names for a
module attribute or an import; for an instance, the attributes the object really had when it
failed (`runtime_locals`: a namedtuple, dataclass or SimpleNamespace built from data), else a
repository class's methods and attributes.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.fixits.python_common import (
    enclosing_scope,
    failing_frame,
    make_candidate,
    module_file,
    nodes_on_line,
    only_near,
    parse_python,
    read_source,
    replace_spans,
    repo_sources,
    runtime_locals,
    runtime_value,
    scope_bindings,
    span_of,
    top_level_names,
)

_NAME_ERROR = re.compile(r"name '(?P<name>\w+)' is not defined")
_MODULE_ATTR = re.compile(r"module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'")
_OBJECT_ATTR = re.compile(r"'(?P<cls>[\w.]+)' object has no attribute '(?P<name>\w+)'")
_IMPORT_NAME = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'")
_NO_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")


def _module_names(evidence: Evidence, module: str) -> set[str] | None:
    rel = module_file(evidence, module)
    source = read_source(evidence, rel) if rel else None
    return top_level_names(source[1]) if source else None


def _class_members(evidence: Evidence, cls: str) -> set[str] | None:
    """Methods, class attributes and `self.x` assignments of the one repo class `cls`."""
    found: list[ast.ClassDef] = []
    for text in repo_sources(evidence).values():
        tree = parse_python(text)
        if tree is not None:
            found += [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls]
    if len(found) != 1:
        builtin = getattr(builtins, cls, None)
        return set(dir(builtin)) if isinstance(builtin, type) else None
    members = {n.name for n in found[0].body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for node in ast.walk(found[0]):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            members.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            members.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members.add(node.target.id)
    return members


def _runtime_attributes(
    evidence: Evidence, tree: ast.Module, cls: str, old: str
) -> set[str] | None:
    """The attribute names the failing receiver had at run time, when it was a captured local
    (or an attribute/key below one) of class `cls`; None when the runtime did not see it."""
    frame = failing_frame(evidence)
    found = runtime_locals(evidence, frame) if frame else {}
    if frame is None or not found:
        return None
    names: set[str] = set()
    for node in nodes_on_line(tree, frame.line):
        if not isinstance(node, ast.Attribute) or node.attr != old:
            continue
        value = runtime_value(node.value, found)
        if value is None or value.attrs is None or value.type.rpartition(".")[2] != cls:
            continue
        seen = value.names()
        if seen is None or old in seen:
            return None  # cut short by a cap, or this receiver has it: not the one that failed
        names |= seen
    return names or None


class FixNameStrategy(FixIt):
    """Rename an undefined name or a missing attribute to the single near name in scope."""

    name: ClassVar[str] = "python_fix_name"
    tag: ClassVar[str] = "fix_name"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame, message = failing_frame(evidence), evidence.event.error_message
        kind = evidence.event.error_type
        if frame is None or kind not in ("NameError", "AttributeError", "UnboundLocalError"):
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        if kind == "NameError" and (found := _NAME_ERROR.search(message)):
            return self._rename_name(evidence, text, tree, found["name"])
        if found := _MODULE_ATTR.search(message):
            names = _module_names(evidence, found["module"])
            return self._rename_attr(evidence, text, tree, found["name"], names)
        if found := _OBJECT_ATTR.search(message):
            cls = found["cls"].rpartition(".")[2]  # 'types.SimpleNamespace' object ...
            runtime = _runtime_attributes(evidence, tree, cls, found["name"])
            members = runtime or _class_members(evidence, cls)
            pool = members
            if runtime:  # every attribute the object had: a family of near names is no guess
                fix = only_near(found["name"], runtime)
                members = {fix} if fix else set()
            where = "the object had at run time" if runtime else "it has"
            return self._rename_attr(evidence, text, tree, found["name"], members, where, pool)
        return []

    def _rename_name(
        self, evidence: Evidence, text: str, tree: ast.Module, old: str
    ) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        assert frame is not None
        scope = enclosing_scope(tree, frame.line)
        bound = scope_bindings(scope) | top_level_names(tree) | set(dir(builtins))
        if old in bound:
            return []  # bound somewhere in scope: an ordering bug, not a misspelling
        fix = nearest(old, bound)
        if fix is None:
            return []
        spans = [
            (*span_of(n), fix)
            for n in ast.walk(scope)
            if isinstance(n, ast.Name) and n.id == old and isinstance(n.ctx, ast.Load)
        ]
        rationale = (
            f"NameError: {old!r} is not defined at {frame.path}:{frame.line}; {fix!r} is the only "
            f"near name in scope (renamed {len(spans)} use(s) in {frame.function})"
        )
        review = near_name_review(evidence, [frame.path], old, fix, bound)
        after = replace_spans(text, spans)
        return make_candidate(self, frame.path, text, after, rationale, 0.85, review)

    def _rename_attr(
        self, evidence: Evidence, text: str, tree: ast.Module, old: str, names: set[str] | None,
        where: str = "it has", pool: set[str] | None = None,
    ) -> list[PatchCandidate]:  # fmt: skip
        frame = failing_frame(evidence)
        assert frame is not None
        fix = nearest(old, names or set())
        if fix is None:
            return []
        on_line = nodes_on_line(tree, frame.line)
        failing = [n for n in on_line if isinstance(n, ast.Attribute) and n.attr == old]
        if not failing:
            return []
        # the same receiver text elsewhere in the file (helpers.x) gets the same fix
        receivers = {ast.get_source_segment(text, n.value) for n in failing}
        spans = []
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == old
                and (ast.get_source_segment(text, node.value) in receivers)
            ):
                _line, _col, end_line, end_col = span_of(node)
                spans.append((end_line, end_col - len(old.encode()), end_line, end_col, fix))
        rationale = (
            f"AttributeError: no attribute {old!r} at {frame.path}:{frame.line}; {fix!r} is the "
            f"only near name {where} (renamed {len(spans)} use(s))"
        )
        choices = pool if pool is not None else names or set()
        review = near_name_review(evidence, [frame.path], old, fix, choices, "attribute")
        after = replace_spans(text, spans)
        return make_candidate(self, frame.path, text, after, rationale, 0.85, review)


class FixImportStrategy(FixIt):
    """Import the near name a repository module really defines, or the near repo module."""

    name: ClassVar[str] = "python_fix_import"
    tag: ClassVar[str] = "fix_import"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame, message = failing_frame(evidence), evidence.event.error_message
        if frame is None or evidence.event.error_type not in ("ImportError", "ModuleNotFoundError"):
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        imports = [n for n in nodes_on_line(tree, frame.line) if isinstance(n, ast.ImportFrom)]
        if (found := _IMPORT_NAME.search(message)) and len(imports) == 1:
            names = _module_names(evidence, found["module"]) or set()
            fix = nearest(found["name"], names)
            review = (
                near_name_review(evidence, [frame.path], found["name"], fix, names) if fix else ""
            )
            return self._rename_imported(
                evidence, text, tree, imports[0], found["name"], fix, review
            )
        if (found := _NO_MODULE.search(message)) and len(imports) == 1:
            return self._rename_module(evidence, text, imports[0], found["module"])
        return []

    def _rename_imported(
        self, evidence: Evidence, text: str, tree: ast.Module, node: ast.ImportFrom,
        old: str, fix: str | None, review: str = "",
    ) -> list[PatchCandidate]:  # fmt: skip
        frame = failing_frame(evidence)
        aliases = [a for a in node.names if a.name == old]
        if fix is None or frame is None or len(aliases) != 1:
            return []
        spans = [(*span_of(aliases[0]), fix if aliases[0].asname is None
                  else f"{fix} as {aliases[0].asname}")]  # fmt: skip
        if aliases[0].asname is None:  # the code calls it by the imported name: rename uses
            scope = tree if frame.function == "<module>" else enclosing_scope(tree, frame.line)
            spans += [(*span_of(n), fix) for n in ast.walk(scope)
                      if isinstance(n, ast.Name) and n.id == old]  # fmt: skip
        rationale = (
            f"ImportError: {node.module} has no {old!r}; {fix!r} is the only near name it "
            f"defines ({frame.path}:{frame.line})"
        )
        after = replace_spans(text, spans)
        return make_candidate(self, frame.path, text, after, rationale, 0.85, review)

    def _rename_module(
        self, evidence: Evidence, text: str, node: ast.ImportFrom, old: str
    ) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        if frame is None or node.module != old or node.level:
            return []
        parent, _, leaf = old.rpartition(".")
        siblings = self._sibling_modules(evidence, parent)
        fix_leaf = nearest(leaf, siblings)
        if fix_leaf is None:
            return []
        fix = f"{parent}.{fix_leaf}" if parent else fix_leaf
        line = text.splitlines(keepends=True)[node.lineno - 1]
        new_line = re.sub(rf"\bfrom\s+{re.escape(old)}\b", f"from {fix}", line, count=1)
        lines = text.splitlines(keepends=True)
        lines[node.lineno - 1] = new_line
        rationale = f"ModuleNotFoundError: {old!r}; {fix!r} is the only near module in the repo"
        review = near_name_review(evidence, [frame.path], leaf, fix_leaf, siblings, "module")
        return make_candidate(self, frame.path, text, "".join(lines), rationale, 0.8, review)

    @staticmethod
    def _sibling_modules(evidence: Evidence, parent: str) -> set[str]:
        """Module names next to the missing one (in the package `parent`, or top level)."""
        root = Path(evidence.repo_root)
        if parent:
            package = module_file(evidence, parent)
            if package is None or not package.endswith("__init__.py"):
                return set()
            folders = [(root / package).parent]
        else:
            folders = [(root / evidence.unit_path).parent] if evidence.unit_path else []
        found: set[str] = set()
        for folder in folders:
            found |= {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
            found |= {p.parent.name for p in folder.glob("*/__init__.py")}
        return found

"""TypeError from a call whose signature changed in the repo -> the near parameter name.

    TypeError: write_rows() got an unexpected keyword argument 'rowz'
    TypeError: load() missing 1 required positional argument: 'path'   (the call passed `pth=`)

The function must be defined exactly once in the repository code the task runs (the DAG file,
the failing file and the modules they import); its parameters are the candidates. When it is
not (a handler picked from a dict at run time, two definitions), the parameters of the very
function the call reached, recorded with the failing frame's locals (`runtime_locals`), are.
The keyword is renamed at the failing call only; except when the breaking change itself
renamed that parameter (`def f(a, rates)` -> `def f(a, eur_rates)`): then the new name is the
fix whatever its spelling, at every call of the function in that code still passing the old.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.apply import derive_edit
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.fixits.python_common import (
    failing_frame,
    make_candidate,
    nodes_on_line,
    only_near,
    parse_python,
    read_source,
    replace_spans,
    repo_sources,
    runtime_locals,
    runtime_value,
)
from patchit.patching.renames import Rename, breaking_renames

_UNEXPECTED = re.compile(r"(?P<func>[\w.]+)\(\) got an unexpected keyword argument '(?P<kw>\w+)'")
_MISSING = re.compile(
    r"(?P<func>[\w.]+)\(\) missing \d+ required (?:positional|keyword-only) arguments?: "
    r"('\w+'(?:(?:, | and )'\w+')*)"
)

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _parameters(node: Function) -> list[str]:
    args = node.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return [n for n in names if n not in ("self", "cls")]


def repo_function(evidence: Evidence, qualname: str) -> Function | None:
    """The one definition of `name` (or `Class.name`) in the task's repository code."""
    cls, _, name = qualname.rpartition(".")
    found: list[Function] = []
    for text in repo_sources(evidence).values():
        tree = parse_python(text)
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.ClassDef) and cls and node.name == cls:
                found += [f for f in node.body if isinstance(f, Function) and f.name == name]
            elif not cls and isinstance(node, Function) and node.name == name:
                found.append(node)
    unique = {ast.dump(f.args) for f in found}
    return found[0] if found and len(unique) == 1 else None


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _runtime_parameters(evidence: Evidence, call: ast.Call) -> list[str] | None:
    """Parameters of the function the call reached, when the runtime recorded it as a local
    (or an attribute/key below one)."""
    frame = failing_frame(evidence)
    value = runtime_value(call.func, runtime_locals(evidence, frame)) if frame else None
    if value is None or value.params is None:
        return None
    return [p for p in value.params if p not in ("self", "cls")]


class FixCallStrategy(FixIt):
    """Rename a call's keyword to the near parameter name of the repo function it calls."""

    name: ClassVar[str] = "python_fix_call"
    tag: ClassVar[str] = "fix_call"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame, message = failing_frame(evidence), evidence.event.error_message
        if evidence.event.error_type != "TypeError" or frame is None:
            return []
        if found := _UNEXPECTED.search(message):
            qualname, unexpected, missing = found["func"], found["kw"], []
        elif found := _MISSING.search(message):
            qualname, unexpected, missing = found["func"], None, re.findall(r"'(\w+)'", found[2])
        else:
            return []
        rename = _renamed_parameter(evidence, qualname, unexpected) if unexpected else None
        if rename is not None and (followed := self._follow(evidence, rename)):
            return followed
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        leaf = qualname.rpartition(".")[2]
        calls = [n for n in nodes_on_line(tree, frame.line) if isinstance(n, ast.Call)]
        named = [n for n in calls if _called_name(n) == leaf]
        function = repo_function(evidence, qualname)
        pick: Callable[[str, set[str]], str | None] = nearest
        if function is not None and len(named) == 1:
            call, params = named[0], _parameters(function)
        else:  # the callee is not one repo definition by that name: ask the runtime
            pick = only_near
            reached = [
                (c, p) for c in calls if (p := _runtime_parameters(evidence, c))
                and (unexpected is None or (unexpected not in p
                                            and unexpected in {k.arg for k in c.keywords}))
            ]  # fmt: skip
            if len(reached) != 1:
                return []
            call, params = reached[0]
        passed = {k.arg for k in call.keywords if k.arg}
        renames: dict[str, str] = {}  # keyword passed -> parameter it should be
        if unexpected is not None:
            fix = pick(unexpected, set(params) - passed)
            renames = {unexpected: fix} if fix else {}
        for param in missing:  # (a **kwargs function swallowed the misspelt keyword)
            wrong = nearest(param, passed - set(params))
            if wrong is None:
                return []
            renames[wrong] = param
        spans = [
            (k.lineno, k.col_offset, k.lineno, k.col_offset + len(k.arg.encode()), renames[k.arg])
            for k in call.keywords
            if k.arg in renames
        ]
        if not spans:
            return []
        shown = ", ".join(f"{old}= -> {new}=" for old, new in sorted(renames.items()))
        rationale = (
            f"TypeError at {frame.path}:{frame.line}: {qualname}() takes "
            f"({', '.join(params)}); renamed {shown}"
        )
        reviews = [
            near_name_review(evidence, [frame.path], old, new, params, "keyword")
            for old, new in sorted(renames.items())
        ]
        review = "; ".join(r for r in reviews if r)
        after = replace_spans(text, spans)
        return make_candidate(self, frame.path, text, after, rationale, 0.85, review)

    def _follow(self, evidence: Evidence, rename: Rename) -> list[PatchCandidate]:
        """`old=` -> `new=` in every call of the function in the task's repository code that
        still passes the old keyword (and not the new one)."""
        if repo_function(evidence, rename.owner) is None:
            return []  # two functions by that name: a call by name may reach the other one
        leaf = rename.owner.rpartition(".")[2]
        edits = []
        for rel, text in repo_sources(evidence).items():
            tree = parse_python(text)
            spans = []
            for call in ast.walk(tree) if tree else []:
                if not isinstance(call, ast.Call) or _called_name(call) != leaf:
                    continue
                passed = {k.arg for k in call.keywords}
                if rename.new in passed:
                    continue
                spans += [
                    (k.lineno, k.col_offset, k.lineno, k.col_offset + len(k.arg.encode()),
                     rename.new)
                    for k in call.keywords if k.arg == rename.old
                ]  # fmt: skip
            after = replace_spans(text, spans) if spans else text
            if after != text and parse_python(after) is not None:
                edits.append(derive_edit(rel, text, after))
        if not edits:
            return []
        files = ", ".join(e.path for e in edits)
        why = (
            f"the breaking change renamed {rename.owner}()'s parameter {rename.old} to "
            f"{rename.new} ({rename.path}); calls passing {rename.old}= follow it ({files})"
        )
        return [PatchCandidate(strategy=self.name, tag=self.tag, tier=self.tier, edits=edits,
                               rationale=why, confidence=0.9)]  # fmt: skip


def _renamed_parameter(evidence: Evidence, qualname: str, keyword: str) -> Rename | None:
    """The breaking change's rename of `keyword` in the function the error names (Python
    names it by `__qualname__`, so a method is `Class.method`)."""
    found = [
        r for r in breaking_renames(evidence)
        if r.kind == "parameter" and r.old == keyword
        and (r.owner == qualname or r.owner.rpartition(".")[2] == qualname)
    ]  # fmt: skip
    return found[0] if len(found) == 1 else None

"""What the tier-0 Python fix-its share: the failing in-repo frame, parsed files, scopes and
exact-position rewrites of a node's source text.

Rewrites go through `ast` positions, never a text search, so a name that also appears in a
string, a comment or another function is left alone. `col_offset` is a UTF-8 byte offset.
"""

from __future__ import annotations

import ast
from pathlib import Path

from patchit.events.model import RuntimeValue
from patchit.evidence.model import Evidence, TracebackFrame
from patchit.evidence.similarity import DEFAULT_MIN_RATIO, name_ratio, nearest
from patchit.patching.apply import derive_edit
from patchit.patching.base import PatchCandidate, Strategy
from patchit.patching.fixits._common import read_repo_file
from patchit.text.python_source import parse_python as parse_python  # the fix-its import it here

Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef


def failing_frame(evidence: Evidence) -> TracebackFrame | None:
    """The innermost traceback frame that runs repository code."""
    return evidence.frames[-1] if evidence.frames else None


def runtime_locals(evidence: Evidence, frame: TracebackFrame) -> dict[str, RuntimeValue]:
    """The locals captured at run time for `frame` (empty when they belong to another frame)."""
    runtime = evidence.runtime_locals
    if runtime is None or (runtime.path, runtime.line) != (frame.path, frame.line):
        return {}
    return runtime.locals


def runtime_value(node: ast.expr, found: dict[str, RuntimeValue]) -> RuntimeValue | None:
    """What an expression evaluated to at run time, when it is a captured local or a constant
    key, attribute or index below one: `row`, `payload["data"]`, `rows[0]`, `batch.header`."""
    if isinstance(node, ast.Name):
        return found.get(node.id)
    if isinstance(node, ast.Attribute):
        base = runtime_value(node.value, found)
        return base.inner.get(node.attr) if base is not None and base.attrs is not None else None
    if isinstance(node, ast.Subscript):
        base = runtime_value(node.value, found)
        if base is None:
            return None
        key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if isinstance(key, str):
            return base.inner.get(key) if base.keys is not None else None
        return base.item  # rows[0], rows[i]: a list's items are taken to be alike
    return None


def only_near(name: str, candidates: set[str]) -> str | None:
    """The one candidate near `name`, None when several are (for names seen at run time).

    A record read at run time shows every field it has, and fields often come in families
    (`amount_net_cents`, `amount_gross_cents`): when more than one is near the missing name,
    picking the nearest is a guess, however clear its lead.
    """
    near = [c for c in candidates if c != name and name_ratio(name, c) >= DEFAULT_MIN_RATIO]
    return nearest(name, near) if len(near) == 1 else None


def nodes_on_line(tree: ast.AST, line: int) -> list[ast.AST]:
    """Nodes whose span covers `line`."""
    found = []
    for node in ast.walk(tree):
        first = getattr(node, "lineno", None)
        if first is not None and first <= line <= (getattr(node, "end_lineno", None) or first):
            found.append(node)
    return found


def enclosing_scope(tree: ast.Module, line: int) -> Scope:
    """The innermost function (or the module) whose body holds `line`."""
    best: Scope = tree
    best_line = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and node.lineno >= best_line:
                best, best_line = node, node.lineno
    return best


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    names.add((alias.asname or alias.name).split(".")[0])
    return names


def scope_bindings(scope: Scope) -> set[str]:
    """Parameters and names assigned or imported directly in a function scope."""
    names: set[str] = set()
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                names.add(arg.arg)
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    return names


def segment(text: str, node: ast.AST) -> str | None:
    return ast.get_source_segment(text, node)


def replace_spans(text: str, spans: list[tuple[int, int, int, int, str]]) -> str:
    """Replace (lineno, col, end_lineno, end_col, new) spans (1-based lines, byte columns)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    data = text.encode("utf-8")
    ordered = sorted(set(spans), key=lambda s: (s[0], s[1]), reverse=True)
    for lineno, col, end_lineno, end_col, new in ordered:
        start, end = offsets[lineno - 1] + col, offsets[end_lineno - 1] + end_col
        data = data[:start] + new.encode("utf-8") + data[end:]
    return data.decode("utf-8")


def span_of(node: ast.AST) -> tuple[int, int, int, int]:
    end_line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    end_col = getattr(node, "end_col_offset", None)
    return node.lineno, node.col_offset, end_line, end_col  # type: ignore[attr-defined,return-value]


def read_source(evidence: Evidence, rel: str) -> tuple[str, ast.Module] | None:
    text = read_repo_file(evidence, rel)
    tree = parse_python(text) if text is not None else None
    return (text, tree) if text is not None and tree is not None else None


def repo_sources(evidence: Evidence) -> dict[str, str]:
    """The DAG file, the modules it imports and the traceback's files: path -> text."""
    found: dict[str, str] = {}
    for rel in [evidence.unit_path, *(f.path for f in evidence.frames), *evidence.related_code]:
        if rel and rel.endswith(".py") and rel not in found:
            text = read_repo_file(evidence, rel)
            if text is not None:
                found[rel] = text
    return found


def make_candidate(
    strategy: Strategy,
    path: str,
    before: str,
    after: str,
    rationale: str,
    confidence: float,
    review: str = "",
) -> list[PatchCandidate]:
    if before == after or parse_python(after) is None:
        return []  # an edit that does not parse is never proposed
    return [
        PatchCandidate(
            strategy=strategy.name,
            tag=strategy.tag,
            tier=strategy.tier,
            edits=[derive_edit(path, before, after)],
            rationale=rationale,
            confidence=confidence,
            review=review,
        )
    ]


def module_file(evidence: Evidence, module: str) -> str | None:
    """The repo file of a dotted module name, searched from the DAG file's folders upwards."""
    root = Path(evidence.repo_root)
    bases: list[Path] = []
    if evidence.unit_path:
        bases += [p for p in (root / evidence.unit_path).parents if p.is_relative_to(root)]
    bases.append(root)
    rel = Path(*module.split("."))
    for base in dict.fromkeys(bases):
        for candidate in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
            if candidate.is_file():
                return candidate.relative_to(root).as_posix()
    return None

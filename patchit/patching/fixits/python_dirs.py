"""FileNotFoundError on a write -> create the output directory before the write.

    FileNotFoundError: [Errno 2] No such file or directory: '/data/out/daily/2024-03-01/x.csv'

Only when the failing call writes (`open(p, "w"/"a"/"x")`, `df.to_csv(p)`, `p.write_text()`,
`p.open("w")`, `shutil.copy(src, p)`): a missing input is another task's or the environment's
problem, not this code's. The inserted line matches the file's style: `Path(...).parent.mkdir`
where the file works with pathlib, `os.makedirs(os.path.dirname(...))` where it uses `os`.
"""

from __future__ import annotations

import ast
import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.pylog import is_write_call
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits.python_common import (
    failing_frame,
    make_candidate,
    nodes_on_line,
    read_source,
)

_MISSING = re.compile(r"No such file or directory: '([^']+)'")
_FRAME_WRITERS = {"to_csv", "to_parquet", "to_json", "to_excel", "to_feather", "to_pickle",
                  "to_orc", "to_html", "to_xml", "savefig"}  # fmt: skip
_PATH_METHODS = {"write_text", "write_bytes", "open", "touch"}
_WRITE_MODE = re.compile(r"[wax]")


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def written_path(call: ast.Call) -> tuple[ast.expr, bool] | None:
    """(the expression naming the file a call writes, whether it is a Path receiver)."""
    func = call.func
    kwargs = {k.arg: k.value for k in call.keywords if k.arg}
    if (isinstance(func, ast.Name) and func.id == "open") or (
        isinstance(func, ast.Attribute) and func.attr == "open"
        and isinstance(func.value, ast.Name) and func.value.id in ("io", "codecs")
    ):  # fmt: skip
        mode = _const_str(call.args[1] if len(call.args) > 1 else kwargs.get("mode"))
        path = call.args[0] if call.args else kwargs.get("file")
        return (path, False) if path is not None and mode and _WRITE_MODE.search(mode) else None
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr in _FRAME_WRITERS:
        path = call.args[0] if call.args else kwargs.get("path_or_buf") or kwargs.get("path")
        return (path, False) if path is not None else None
    if func.attr in ("copy", "copyfile", "copy2", "move") and len(call.args) > 1:
        return call.args[1], False
    if func.attr in _PATH_METHODS:
        mode = _const_str(call.args[0] if call.args else kwargs.get("mode"))
        if func.attr == "open" and not (mode and _WRITE_MODE.search(mode)):
            return None
        return func.value, True
    return None


def _statement_of(tree: ast.Module, call: ast.Call) -> ast.stmt | None:
    holders = [s for s in ast.walk(tree) if isinstance(s, ast.stmt) and call in ast.walk(s)]
    return max(holders, key=lambda s: s.lineno, default=None)


def _imports(tree: ast.Module) -> tuple[bool, bool, int]:
    """(imports os, imports pathlib.Path, line after the last top-level import)."""
    has_os = has_path = False
    last = 0
    for node in tree.body:
        if isinstance(node, ast.Import):
            has_os |= any(a.name == "os" and a.asname is None for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "pathlib":
            has_path |= any(a.name == "Path" and a.asname is None for a in node.names)
        else:
            continue
        last = node.end_lineno or node.lineno
    return has_os, has_path, last


def _wrap(expr: str, node: ast.expr) -> str:
    simple = isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript)
    return expr if simple else f"({expr})"


class CreateDirStrategy(FixIt):
    """Create the missing parent directory of a file the task writes, just before the write."""

    name: ClassVar[str] = "python_create_dir"
    tag: ClassVar[str] = "create_dir"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        frame = failing_frame(evidence)
        missing = _MISSING.search(evidence.event.error_message)
        if evidence.event.error_type != "FileNotFoundError" or frame is None or missing is None:
            return []
        if not is_write_call(frame.code) or "/" not in missing.group(1).replace("\\", "/"):
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        calls = [n for n in nodes_on_line(tree, frame.line) if isinstance(n, ast.Call)]
        found = [(c, w) for c in calls if (w := written_path(c)) is not None]
        if len(found) != 1:
            return []  # no write call, or several on one line: which directory is unclear
        call, (path_node, is_path) = found[0]
        expr = ast.get_source_segment(text, path_node)
        statement = _statement_of(tree, call)
        if expr is None or "\n" in expr or statement is None:
            return []
        has_os, has_path, last_import = _imports(tree)
        uses_pathlib = text.count("Path(") + text.count(".parent") > text.count("os.path.")
        if is_path:
            line = f"{_wrap(expr, path_node)}.parent.mkdir(parents=True, exist_ok=True)"
        elif has_path and (uses_pathlib or not has_os):
            line = f"Path({expr}).parent.mkdir(parents=True, exist_ok=True)"
        else:
            line = f"os.makedirs(os.path.dirname({expr}), exist_ok=True)"
        lines = text.splitlines(keepends=True)
        target = lines[statement.lineno - 1]
        indent = target[: len(target) - len(target.lstrip())]
        newline = "\r\n" if target.endswith("\r\n") else "\n"
        lines.insert(statement.lineno - 1, f"{indent}{line}{newline}")
        if line.startswith("os.") and not has_os:
            lines.insert(last_import, f"import os{newline}")
        rationale = (
            f"{frame.path}:{frame.line} writes {missing.group(1)!r} but its directory does not "
            f"exist; create it before the write in {frame.function}"
        )
        return make_candidate(self, frame.path, text, "".join(lines), rationale, 0.8)

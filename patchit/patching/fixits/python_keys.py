"""KeyError on a dict / XCom / DataFrame key -> the one near key that exists.

    KeyError: 'amout'        (row["amout"] where the upstream task returned {"amount": ...})

The keys that exist come, best first, from the failing frame's locals captured at run time
(`runtime_locals`: the keys of the very dict the code subscripted, a CSV row's header, a JSON
payload's fields), then from locals a traceback printed, else from the dict literals and
subscript keys written in the repository code the task runs (the DAG file, the failing file,
the modules they import). Never for `os.environ`, `getenv` or
`Variable.get`: a missing configuration key is the environment's to define, not a typo to fix.
"""

from __future__ import annotations

import ast
import re
from typing import ClassVar

from patchit.evidence.model import Evidence
from patchit.evidence.similarity import nearest
from patchit.patching.base import FixIt, PatchCandidate, PriorAttempt
from patchit.patching.fixits.near_names import near_name_review
from patchit.patching.fixits.python_common import (
    enclosing_scope,
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
    span_of,
)

_CONFIG_LOOKUP = re.compile(r"\benviron\b|\bgetenv\(|\bVariable\.get\(|\bconf\.get\(")


def missing_key(evidence: Evidence) -> str | None:
    """The string key of a KeyError event, or None (an int key, another error)."""
    if evidence.event.error_type != "KeyError":
        return None
    try:
        key = ast.literal_eval(evidence.event.error_message.strip())
    except (ValueError, SyntaxError):
        return None
    return key if isinstance(key, str) else None


def _str_keys(tree: ast.AST) -> set[str]:
    """Keys of dict literals, dict(k=...) calls and string subscripts in a module."""
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys if isinstance(k, ast.Constant)
                     and isinstance(k.value, str)}  # fmt: skip
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "dict":
                keys |= {kw.arg for kw in node.keywords if kw.arg}
        elif isinstance(node, ast.Subscript) and isinstance(_const(node), str):
            keys.add(str(_const(node)))
    return keys


def _const(node: ast.Subscript) -> object:
    return node.slice.value if isinstance(node.slice, ast.Constant) else None


def _local_keys(evidence: Evidence) -> set[str]:
    frame = failing_frame(evidence)
    keys: set[str] = set()
    for value in (frame.locals if frame else {}).values():
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(parsed, dict):
            keys |= {k for k in parsed if isinstance(k, str)}
    return keys


def _runtime_keys(
    evidence: Evidence, failing: list[ast.Subscript], key: str
) -> tuple[set[str], str] | None:
    """Keys of the dict(s) the failing subscript read at run time, and where they came from;
    None when the runtime did not see them (or a cap cut them short)."""
    frame = failing_frame(evidence)
    found = runtime_locals(evidence, frame) if frame else {}
    if not found:
        return None
    keys: set[str] = set()
    bases: list[str] = []
    for node in failing:
        value = runtime_value(node.value, found)
        names = value.names() if value is not None and value.keys is not None else None
        if names is not None and key not in names:  # a dict that has the key did not fail
            keys |= names
            bases.append(ast.unparse(node.value))
    if not bases:
        return None
    return keys, f"the run's {' and '.join(dict.fromkeys(bases))} (keys recorded at run time)"


def _is_config(node: ast.Subscript) -> bool:
    base = node.value
    return isinstance(base, ast.Attribute | ast.Name) and "environ" in ast.dump(base)


class RenameKeyStrategy(FixIt):
    """Rename a missing string key to the single near key the code's data really has."""

    name: ClassVar[str] = "python_rename_key"
    tag: ClassVar[str] = "rename_key"

    def fix(self, evidence: Evidence, history: list[PriorAttempt]) -> list[PatchCandidate]:
        key, frame = missing_key(evidence), failing_frame(evidence)
        if key is None or frame is None or _CONFIG_LOOKUP.search(frame.code):
            return []
        source = read_source(evidence, frame.path)
        if source is None:
            return []
        text, tree = source
        failing = [
            n for n in nodes_on_line(tree, frame.line) if isinstance(n, ast.Subscript)
            and _const(n) == key
        ]  # fmt: skip
        if not failing or any(_is_config(n) for n in failing):
            return []
        keys: set[str] = set()
        where = "the repository code"
        if runtime := _runtime_keys(evidence, failing, key):
            (keys, where), pick = runtime, only_near
        elif keys := _local_keys(evidence):
            where, pick = "its captured locals", nearest
        else:
            for other in repo_sources(evidence).values():
                other_tree = parse_python(other)
                keys |= _str_keys(other_tree) if other_tree else set()
            pick = nearest
        fix = pick(key, keys - {key})
        if fix is None:
            return []
        scope = enclosing_scope(tree, frame.line)
        spans = []
        for node in ast.walk(scope):
            if isinstance(node, ast.Subscript) and _const(node) == key and not _is_config(node):
                old = ast.get_source_segment(text, node.slice) or repr(key)
                quote = old[0] if old[:1] in ("'", '"') else '"'
                spans.append((*span_of(node.slice), f"{quote}{fix}{quote}"))
        after = replace_spans(text, spans)
        rationale = (
            f"KeyError {key!r} at {frame.path}:{frame.line}; {fix!r} is the only near key in "
            f"{where} (renamed {len(spans)} subscript(s) in {frame.function})"
        )
        review = near_name_review(evidence, [frame.path], key, fix, keys, "key")
        return make_candidate(self, frame.path, text, after, rationale, 0.85, review)

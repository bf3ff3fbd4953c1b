"""Python renames one file's change made, read with `ast`: a function, a record's key.

    def read_rows(source, day): ...          ->  def read_landing(source, day): ...
    {"quantity": int(row["quantity"]), ...}  ->  {"units": int(row["quantity"]), ...}

A function defined before and nowhere after in the file, and one defined after and nowhere
before, are one function renamed when they have the same parameters and the same body (as
`ast` reads it, so a reformat does not matter), each the other's only match. A string key of a
dict literal is renamed when a function (same qualified name on both sides) builds the same
number of dict literals, and one of them lost the key and gained the new one at the same
position with the same value expression: the record's field is called something else now,
nothing else about it changed.

The new name need not look like the old: the diff says which it is. The intents (`intents_other`)
and the fix-its that follow a rename to its callers (`patching.renames`) both read these.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from patchit.text.python_source import parse_python

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class PyRename:
    """`old` became `new`: a function (`owner` its class or outer function, "" at the top) or
    a dict key (`owner` the function building the dict)."""

    kind: str  # "function" | "key"
    old: str
    new: str
    owner: str = ""


def _tree(text: str) -> ast.Module | None:
    return parse_python(text)


def _functions(tree: ast.AST, prefix: str = "") -> dict[str, Function]:
    """Functions by qualified name; a name defined twice in one scope is left out."""
    found: dict[str, Function] = {}
    twice: set[str] = set()
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, Function | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if isinstance(child, Function):
                twice |= {name} if name in found else set()
                found[name] = child
            found.update(_functions(child, f"{name}."))
        elif not isinstance(child, ast.expr):  # no definition lives in an expression, which
            found.update(_functions(child, prefix))  # may nest thousands deep
    return {k: v for k, v in found.items() if k not in twice}


def _shape(node: Function) -> str:
    """The function without its name: parameters, decorators and body, as `ast` reads them."""
    return (
        ast.dump(ast.Module(body=[*node.body], type_ignores=[]))
        + ast.dump(node.args)
        + "".join(ast.dump(d) for d in node.decorator_list)
    )


def function_renames(before: str, after: str) -> list[PyRename]:
    was, now = _tree(before), _tree(after)
    if was is None or now is None:
        return []
    old_funcs, new_funcs = _functions(was), _functions(now)
    gone = {q: _shape(f) for q, f in old_funcs.items() if q not in new_funcs}
    added = {q: _shape(f) for q, f in new_funcs.items() if q not in old_funcs}
    found = []
    for old, shape in gone.items():
        matches = [q for q, s in added.items() if s == shape]
        if len(matches) != 1 or [q for q, s in gone.items() if s == shape] != [old]:
            continue
        new = matches[0]
        owner, _, old_name = old.rpartition(".")
        new_owner, _, new_name = new.rpartition(".")
        if owner == new_owner:
            found.append(PyRename("function", old_name, new_name, owner))
    return found


def _dicts(node: ast.AST) -> list[ast.Dict]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Dict)]


def _key(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def key_renames(before: str, after: str) -> list[PyRename]:
    was, now = _tree(before), _tree(after)
    if was is None or now is None:
        return []
    old_funcs, new_funcs = _functions(was), _functions(now)
    found: list[PyRename] = []
    for qualname in sorted(old_funcs.keys() & new_funcs.keys()):
        old_dicts, new_dicts = _dicts(old_funcs[qualname]), _dicts(new_funcs[qualname])
        if len(old_dicts) != len(new_dicts):
            continue
        for a, b in zip(old_dicts, new_dicts, strict=True):
            if len(a.keys) != len(b.keys):
                continue
            old_keys = {_key(k) for k in a.keys}
            new_keys = {_key(k) for k in b.keys}
            for ka, kb, va, vb in zip(a.keys, b.keys, a.values, b.values, strict=True):
                old, new = _key(ka), _key(kb)
                if (old is not None and new is not None and old != new
                        and old not in new_keys and new not in old_keys
                        and ast.dump(va) == ast.dump(vb)):  # fmt: skip
                    found.append(PyRename("key", old, new, qualname))
    return list(dict.fromkeys(found))


def defines_function(text: str, name: str, owner: str) -> bool | None:
    """Whether `text` defines `owner.name` (None: it does not parse)."""
    tree = _tree(text)
    if tree is None:
        return None
    return f"{owner}.{name}".lstrip(".") in _functions(tree)


def function_keys(text: str, owner: str) -> set[str] | None:
    """The string keys of the dict literals `owner` builds (None: no such function, or the
    text does not parse)."""
    tree = _tree(text)
    func = _functions(tree).get(owner) if tree is not None else None
    if func is None:
        return None
    return {k for d in _dicts(func) for node in d.keys if (k := _key(node)) is not None}

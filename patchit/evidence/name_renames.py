"""Docs blocks, project vars and Jinja variables a change renamed, read from its files' two
sides.

A `{% docs orders_status %}` block gone and a `{% docs order_status %}` block of like text
come (each the other's only match), a `vars:` key of `dbt_project.yml` gone and one new key
holding the very same value, or, in one SQL file, a `{% set payment_methods = [...] %}` gone
and a `{% set methods = [...] %}` of the same value come: renames, whatever the spelling.
Read here, in evidence, so the intents (a candidate putting the old name back reverts the
change) and the fix-its that follow the rename (`patchit.patching.renames`) read them the
same way.
"""

from __future__ import annotations

import difflib
import re
from pathlib import PurePosixPath

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

DOCS_MIN_RATIO = 0.8
_DOCS = re.compile(
    r"{%-?\s*docs\s+(?P<name>[A-Za-z_]\w*)\s*-?%}(?P<body>.*?){%-?\s*enddocs\s*-?%}", re.DOTALL
)

_SET = re.compile(r"{%-?\s*set\s+(?P<name>[A-Za-z_]\w*)\s*=(?P<value>.*?)-?%}", re.DOTALL)
_SQL = (".sql",)

Changed = tuple[str, str | None, str | None]  # path, text before (None: added), after


def _normalised(text: str) -> str:
    return " ".join(text.split())


def paired(gone: dict[str, str], came: dict[str, str], ratio: float) -> list[tuple[str, str]]:
    """(old, new) where old's text and new's are alike (`ratio`; 1.0: equal once blanks are
    normalised) and each is the other's only match."""

    def like(a: str, b: str) -> bool:
        x, y = _normalised(a), _normalised(b)
        return x == y or (ratio < 1 and difflib.SequenceMatcher(None, x, y).ratio() >= ratio)

    found = []
    for old, text in sorted(gone.items()):
        matches = [new for new, other in came.items() if like(text, other)]
        if len(matches) == 1 and [o for o, t in gone.items() if like(t, came[matches[0]])] == [old]:
            found.append((old, matches[0]))
    return found


def docs_blocks(text: str) -> dict[str, str]:
    """{name: body} of the docs blocks `text` defines."""
    found: dict[str, str] = {}
    for match in _DOCS.finditer(text):
        found.setdefault(match["name"], match["body"])
    return found


def docs_renames(files: list[Changed]) -> list[tuple[str, str, str, str]]:
    """(old, new, old path, new path) of each docs block renamed."""
    was: dict[str, tuple[str, str]] = {}
    now: dict[str, tuple[str, str]] = {}
    for path, before, after in files:
        for name, body in docs_blocks(before or "").items():
            was.setdefault(name, (body, path))
        for name, body in docs_blocks(after or "").items():
            now.setdefault(name, (body, path))
    gone = {name: body for name, (body, _) in was.items() if name not in now}
    came = {name: body for name, (body, _) in now.items() if name not in was}
    return [(old, new, was[old][1], now[new][1]) for old, new in paired(gone, came, DOCS_MIN_RATIO)]


def project_vars(text: str | None) -> dict[str, str] | None:
    """{var: its value's text} of a `dbt_project.yml`'s top-level `vars:` (a package's
    nested vars left out); None when it does not parse."""
    if text is None:
        return None
    try:
        loaded = YAML(typ="safe", pure=True).load(text)
    except (YAMLError, ValueError, TypeError):
        return None
    found = loaded.get("vars") if isinstance(loaded, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): repr(v) for k, v in found.items() if not isinstance(v, dict)}


def var_renames(files: list[Changed]) -> list[tuple[str, str, str]]:
    """(old, new, path) of each project var renamed: a key gone, one new key, same value."""
    found = []
    for path, before, after in files:
        if PurePosixPath(path).name != "dbt_project.yml":
            continue
        was, now = project_vars(before), project_vars(after)
        if not was or not now:
            continue
        gone = {k: v for k, v in was.items() if k not in now}
        came = {k: v for k, v in now.items() if k not in was}
        found += [(old, new, path) for old, new in paired(gone, came, 1.0)]
    return found


def jinja_sets(text: str) -> dict[str, str]:
    """{name: its value's text} of the `{% set name = value %}` statements of `text` (the
    first of each name)."""
    found: dict[str, str] = {}
    for match in _SET.finditer(text):
        found.setdefault(match["name"], match["value"])
    return found


def jinja_set_renames(files: list[Changed]) -> list[tuple[str, str, str]]:
    """(old, new, path) of each Jinja variable renamed in one SQL file: a `{% set old = v %}`
    gone and a `{% set new = v %}` come, of the same value."""
    found = []
    for path, before, after in files:
        if not path.endswith(_SQL) or before is None or after is None:
            continue
        was, now = jinja_sets(before), jinja_sets(after)
        gone = {k: v for k, v in was.items() if k not in now}
        came = {k: v for k, v in now.items() if k not in was}
        found += [(old, new, path) for old, new in paired(gone, came, 1.0)]
    return found

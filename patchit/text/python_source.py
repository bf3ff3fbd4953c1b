"""Python source parsed for reading, never raising: a DAG file is outside input.

`ast.parse` refuses more than syntax: a file nesting brackets or operators thousands deep
raises RecursionError, or MemoryError from the parser's own stack ("too many nested
parentheses" is a SyntaxError; `p/p/p/...` 2,000 deep is not), and a NUL byte a ValueError.
Every reader of a repository's Python (intents, renames, the Airflow evidence, the fix-its)
treats all of them as "not Python it can read" (found by `make fuzz`: MemoryError in the
intents of a generated DAG file).
"""

from __future__ import annotations

import ast


def parse_python(text: str) -> ast.Module | None:
    """The module's tree, or None when Python cannot parse it for any reason."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None

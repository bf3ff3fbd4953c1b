"""Which environment variables a unit's code reads, so the sandbox passes those and no others.

A sandboxed run gets an allowlisted environment (`isolation.allowed_env`) plus the variables
its code names: `env_var('X')` in dbt models, macros and YAML, `os.environ['X']`,
`os.environ.get('X')` and `os.getenv('X')` in Python, `$X` / `${X}` in a CI step's script.
The scan is bounded (file count and size) and never follows symlinks out of the tree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

MAX_FILES = 5_000
MAX_FILE_BYTES = 1_000_000
SUFFIXES = frozenset(
    {".sql", ".yml", ".yaml", ".py", ".jinja", ".j2", ".md", ".csv", ".cfg", ".toml", ".ini",
     ".sh", ".txt", ".json"}
)  # fmt: skip
_SKIP_DIRS = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", "venv", "target", "logs", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".tox"}
)  # fmt: skip
_NAME = r"([A-Za-z_][A-Za-z0-9_]{0,127})"
_CODE_PATTERNS = (
    re.compile(r"env_var\(\s*['\"]" + _NAME + r"['\"]"),
    re.compile(r"environ\s*\[\s*['\"]" + _NAME + r"['\"]\s*\]"),
    re.compile(r"environ\.(?:get|setdefault|pop)\(\s*['\"]" + _NAME + r"['\"]"),
    re.compile(r"getenv[bs]?\(\s*['\"]" + _NAME + r"['\"]"),
)
_SHELL_PATTERN = re.compile(r"\$\{?" + _NAME)


def names_in_text(text: str, shell: bool = False) -> set[str]:
    """Variable names `text` reads (code patterns; `$X` too with `shell`)."""
    found: set[str] = set()
    for pattern in _CODE_PATTERNS:
        found.update(pattern.findall(text))
    if shell:
        found.update(_SHELL_PATTERN.findall(text))
    return found


def referenced_env_names(
    roots: Iterable[Path], max_files: int = MAX_FILES, known: Mapping[str, str] | None = None
) -> set[str]:
    """Names read by the text files under `roots` (dirs or files), bounded. A file that does
    not hold "env" (nor "$", for a shell script) names none and is not decoded. `known`: a
    key for the content of files whose content is known (a path -> its git blob): what such a
    file names is read once per key, and remembered."""
    found: set[str] = set()
    seen = 0
    for root in roots:
        root = Path(root)
        files: Iterable[str]
        if root.is_file():
            files = [str(root)]
        elif root.is_dir():
            files = _walk(str(root))
        else:
            continue
        for path in files:
            if seen >= max_files:
                return found
            seen += 1
            shell = path.endswith(".sh")
            key = known.get(path) if known else None
            if key is not None:
                remembered = _BY_CONTENT.get((key, shell))
                if remembered is None:
                    remembered = frozenset(_names_in_file(path, shell))
                    if len(_BY_CONTENT) >= _BY_CONTENT_MAX:
                        _BY_CONTENT.clear()  # another project's files: filled again
                    _BY_CONTENT[(key, shell)] = remembered
                found |= remembered
                continue
            found |= _names_in_file(path, shell)
    return found


def _names_in_file(path: str, shell: bool) -> set[str]:
    """The names one file reads; none when it cannot be read or is too large."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                return set()
            data = handle.read()
    except OSError:
        return set()
    if b"env" not in data and not (shell and b"$" in data):
        return set()
    return names_in_text(data.decode("utf-8", errors="replace"), shell=shell)


# what a file of known content names, by (content key, read as a shell script)
_BY_CONTENT: dict[tuple[str, bool], frozenset[str]] = {}
_BY_CONTENT_MAX = 50_000


def _walk(root: str) -> Iterable[str]:
    """The text files under `root` in sorted order (a directory's files, then each of its
    directories in turn), skipping tool dirs and symlinks."""
    pending = [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        dirs = []
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIP_DIRS:
                        dirs.append(entry.path)
                elif os.path.splitext(entry.name)[1] in SUFFIXES:
                    yield entry.path
            except OSError:
                continue
        pending.extend(reversed(dirs))  # the first directory is walked next

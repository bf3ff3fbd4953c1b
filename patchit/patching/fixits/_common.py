"""What the tier-0 fix-its share: the error text, repo-relative paths, reading repo files,
the code regions of a Jinja-SQL file, and a project index built by scanning files."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from patchit.evidence.model import Evidence, ProjectIndex

# One lexer pass over Jinja-SQL: Jinja blocks, SQL strings, SQL comments, quoted identifiers.
_TOKEN = re.compile(
    r"(?P<jinja>\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})"
    r"|(?P<string>'(?:[^']|'')*')"
    r"|(?P<comment>--[^\n]*|/\*.*?\*/)",
    re.DOTALL,
)


def error_text(evidence: Evidence) -> str:
    """The failure message: the packed evidence error and the event's own message."""
    parts = [evidence.error, evidence.event.error_message]
    return "\n".join(dict.fromkeys(p for p in parts if p))


def blank_regions(text: str) -> str:
    """`text` with its Jinja blocks, SQL strings and comments blanked (same length and lines),
    so a scan of the SQL tokens left cannot match inside them."""
    return _TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def project_prefix(evidence: Evidence) -> str:
    """The dbt project directory relative to the repo root ('' when they are the same)."""
    if evidence.project_dir is not None:
        return "" if evidence.project_dir in ("", ".") else evidence.project_dir.rstrip("/")
    dbt = evidence.event.dbt
    if dbt is not None:
        rel = os.path.relpath(Path(dbt.project_dir).resolve(), Path(evidence.repo_root).resolve())
        if not rel.startswith(".."):
            return "" if rel == "." else rel
    return ""


def to_repo_path(evidence: Evidence, project_rel: str) -> str:
    """A path dbt printed (relative to the project) as a path relative to the repo root."""
    prefix = project_prefix(evidence)
    return f"{prefix}/{project_rel}" if prefix else project_rel


def read_repo_file(evidence: Evidence, rel: str) -> str | None:
    """Text of a file under the repo root, or None (missing, outside the repo, not text)."""
    root = Path(evidence.repo_root).resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def sub_in_regions(
    text: str,
    pattern: re.Pattern[str],
    repl: Callable[[re.Match[str]], str],
    region: str,
    lines: set[int] | None = None,
) -> tuple[str, int]:
    """Apply `pattern` only in plain SQL (`region="sql"`) or only inside Jinja blocks
    (`region="jinja"`); strings and comments, Jinja's `{# #}` too, are never rewritten (a
    macro's doc comment showing `{{ risk_band(...) }} as risk_band` had its alias renamed).
    With `lines` (1-based), only matches starting on those lines are. Returns (text, count)."""
    out: list[str] = []
    count = 0
    pos = 0

    def rewrite(chunk: str, offset: int) -> str:
        nonlocal count

        def one(match: re.Match[str]) -> str:
            nonlocal count
            line = text.count("\n", 0, offset + match.start()) + 1
            if lines is not None and line not in lines:
                return match.group(0)
            count += 1
            return repl(match)

        return pattern.sub(one, chunk)

    for match in _TOKEN.finditer(text):
        plain = text[pos : match.start()]
        out.append(rewrite(plain, pos) if region == "sql" else plain)
        token = match.group(0)
        jinja = region == "jinja" and match.lastgroup == "jinja" and not token.startswith("{#")
        out.append(rewrite(token, match.start()) if jinja else token)
        pos = match.end()
    rest = text[pos:]
    out.append(rewrite(rest, pos) if region == "sql" else rest)
    return "".join(out), count


def _paths(config: dict[str, object], key: str, default: str) -> list[str]:
    value = config.get(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return [default]


def _load_yaml(path: Path) -> object:
    try:
        return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError):
        return None


_MACRO_DEF = re.compile(r"\{%-?\s*macro\s+(\w+)")
_SNAPSHOT_DEF = re.compile(r"\{%-?\s*snapshot\s+(\w+)")


def scan_index(evidence: Evidence) -> ProjectIndex:
    """The evidence index merged with names found by scanning the project's files.

    Parse-time failures have no manifest, so the files are the only record of what exists.
    """
    project = Path(evidence.repo_root) / project_prefix(evidence)
    loaded = _load_yaml(project / "dbt_project.yml")
    config: dict[str, object] = loaded if isinstance(loaded, dict) else {}
    index = evidence.index.model_copy(deep=True)

    def stems(dirs: list[str], suffixes: tuple[str, ...]) -> list[str]:
        found = []
        for d in dirs:
            for path in sorted((project / d).rglob("*")):
                if path.suffix in suffixes and path.is_file():
                    found.append(path.stem)
        return found

    def defs(dirs: list[Path], pattern: re.Pattern[str]) -> list[str]:
        found = []
        for d in dirs:
            for path in sorted(d.rglob("*.sql")):
                found += pattern.findall(path.read_text(encoding="utf-8", errors="replace"))
        return found

    model_dirs = _paths(config, "model-paths", "models")
    index.models = sorted({*index.models, *stems(model_dirs, (".sql", ".py"))})
    index.seeds = sorted({*index.seeds, *stems(_paths(config, "seed-paths", "seeds"), (".csv",))})
    snap_dirs = [project / d for d in _paths(config, "snapshot-paths", "snapshots")]
    index.snapshots = sorted({*index.snapshots, *defs(snap_dirs, _SNAPSHOT_DEF)})
    macro_dirs = [project / d for d in _paths(config, "macro-paths", "macros")]
    macro_dirs += sorted((project / "dbt_packages").glob("*/macros"))
    index.macros = sorted({*index.macros, *defs(macro_dirs, _MACRO_DEF)})
    sources = set(index.sources)
    for d in model_dirs:
        for path in sorted((project / d).rglob("*.y*ml")):
            doc = _load_yaml(path)
            listed = doc.get("sources") if isinstance(doc, dict) else None
            for source in listed if isinstance(listed, list) else []:
                if isinstance(source, dict) and isinstance(source.get("name"), str):
                    for table in source.get("tables") or []:
                        if isinstance(table, dict) and isinstance(table.get("name"), str):
                            sources.add((source["name"], table["name"]))
    index.sources = sorted(sources)
    return index


def project_name(evidence: Evidence) -> str | None:
    """The dbt project's `name` (the namespace of its own macros: `shop.cents_to_dollars`)."""
    loaded = _load_yaml(Path(evidence.repo_root) / project_prefix(evidence) / "dbt_project.yml")
    name = loaded.get("name") if isinstance(loaded, dict) else None
    return name if isinstance(name, str) and name.isidentifier() else None


def model_files(evidence: Evidence) -> dict[str, str]:
    """Model name -> its file relative to the repo root, found by scanning the model paths."""
    prefix = project_prefix(evidence)
    project = Path(evidence.repo_root) / prefix
    loaded = _load_yaml(project / "dbt_project.yml")
    config: dict[str, object] = loaded if isinstance(loaded, dict) else {}
    found: dict[str, str] = {}
    for d in _paths(config, "model-paths", "models"):
        for path in sorted((project / d).rglob("*")):
            if path.suffix in (".sql", ".py") and path.is_file():
                found.setdefault(path.stem, to_repo_path(evidence, str(path.relative_to(project))))
    return found


def package_model_files(evidence: Evidence) -> dict[str, str]:
    """Model name -> its file under an installed package (`dbt_packages/<pkg>/models/x.sql`,
    or `packages-install-path`), relative to the repo root. A fix-it reads these (a package
    upgrade that renamed a staging model's column) and never edits them."""
    prefix = project_prefix(evidence)
    project = Path(evidence.repo_root) / prefix
    loaded = _load_yaml(project / "dbt_project.yml")
    config: dict[str, object] = loaded if isinstance(loaded, dict) else {}
    installed = config.get("packages-install-path")
    root = project / (installed.strip("/") if isinstance(installed, str) else "dbt_packages")
    found: dict[str, str] = {}
    for package in sorted(root.glob("*/dbt_project.yml")) if root.is_dir() else []:
        own = _load_yaml(package)
        paths = _paths(own if isinstance(own, dict) else {}, "model-paths", "models")
        for d in paths:
            for path in sorted((package.parent / d).rglob("*")):
                if path.suffix in (".sql", ".py") and path.is_file():
                    rel = path.relative_to(project).as_posix()
                    found.setdefault(path.stem, to_repo_path(evidence, rel))
    return found


_JINJA_STRING = r"'[^'\n]*'|\"[^\"\n]*\""
_NOT_PROJECT_FILES = {"dbt_packages", "target", "logs", ".git"}


def project_files(evidence: Evidence, suffixes: tuple[str, ...] = (".sql",)) -> list[str]:
    """The dbt project's own files with these suffixes (models, macros, tests, snapshots,
    YAML; not installed packages, dbt's output or logs), repo-relative, sorted."""
    root = Path(evidence.repo_root)
    found = []
    for folder, dirs, names in os.walk(root / project_prefix(evidence)):
        dirs[:] = [d for d in dirs if d not in _NOT_PROJECT_FILES]
        for name in names:
            if name.endswith(suffixes):
                found.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(found)


def call_pattern(old: str, namespaces: tuple[str, ...] = ()) -> re.Pattern[str]:
    """A Jinja use of `old` (`{{ old(...) }}`, or `ns.old(...)` for each of `namespaces`,
    such as the project's own name), or a string literal or a macro definition, which
    `rewrite_jinja` leaves as they are. `other_package.old` is another package's macro."""
    spaced = "".join(rf"|(?<=(?<![\w.]){re.escape(ns)}\.)" for ns in namespaces)
    return re.compile(
        rf"(?P<keep>{_JINJA_STRING}|\bmacro\s+{re.escape(old)}\b)"
        rf"|(?:(?<![\w.]){spaced}){re.escape(old)}(?!\w)"
    )


def rewrite_jinja(text: str, pattern: re.Pattern[str], new: str, lines: set[int] | None) -> str:
    def repl(match: re.Match[str]) -> str:
        return match.group(0) if match.group("keep") else new

    return sub_in_regions(text, pattern, repl, "jinja", lines)[0]

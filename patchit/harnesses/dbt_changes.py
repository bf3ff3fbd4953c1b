"""Which nodes a candidate changed, judged without dbt's `state:modified` (plain Python).

A sandbox run builds the failed unit and its descendants, and also every node the candidate
changed with its descendants. dbt can select those itself (`state:modified+ --state <the
failing run's manifest>`), but on a 200-model project that costs a third of a warm
verification: it loads and compares the whole manifest. Here the same question is answered
from the partial-parse file the failing run wrote, which holds the checksum dbt computed for
every file it read (models, YAML, macros, seeds, docs) and the hash of every `dbt_project.yml`:

- a file whose checksum differs in the worktree is changed (dbt's own rule: sha256 of the
  stripped UTF-8 text); a model, seed, snapshot, analysis or singular test file names its
  nodes (from the parse), and each is selected by name with its descendants;
- a new `.sql`/`.py` model, `.csv` seed or singular test is selected by its file name;
- anything else that differs (YAML, a macro, docs, `dbt_project.yml`, a deleted or renamed
  file, a new file dbt would read otherwise) returns None: dbt's `state:modified+` decides,
  as before. So does a failing run that left no usable parse.

Only the project and the packages installed inside it are compared; dbt's own macros come
from the same installation the sandbox runs. A seed too large for dbt to hash is compared by
path, as dbt does (`state:modified` does not see its contents change either).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from patchit.evidence.project_index import config_paths, read_project_config

# Files dbt reads under a project's paths; a new one of these types is a change.
_PARSED_SUFFIXES = (".sql", ".py", ".yml", ".yaml", ".csv", ".md")
_NODE_FILE_TYPES = frozenset({"model", "seed", "snapshot", "analysis", "singular_test"})
_SKIP_DIRS = frozenset({".git", "__pycache__", "target", "logs", "dbt_packages"})
_PATH_KEYS = (
    ("model-paths", "models"), ("seed-paths", "seeds"), ("test-paths", "tests"),
    ("analysis-paths", "analyses"), ("macro-paths", "macros"), ("snapshot-paths", "snapshots"),
    ("docs-paths", None),
)  # fmt: skip


@dataclass(frozen=True)
class ParsedFile:
    file_type: str
    checksum_name: str
    checksum: str
    nodes: tuple[str, ...]  # unique ids defined in the file


@dataclass(frozen=True)
class FailingParse:
    """The failing run's view of the project: its files (by path relative to the project
    dir) and the hash of each local project's `dbt_project.yml` (by the project's dir)."""

    files: dict[str, ParsedFile]
    project_hashes: dict[str, str]  # "" for the root project, "dbt_packages/x" for a package
    searched: frozenset[str]  # the root project's searched paths the run read files from


def file_checksum(path: Path) -> str | None:
    """dbt's checksum of a project file; None when it cannot be read as UTF-8."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


def read_failing_parse(parse_file: Path) -> FailingParse | None:
    """The parse file's record of the root project's files (and its packages'), None when it
    has none (unreadable, or another format)."""
    try:
        stat = parse_file.stat()
    except OSError:
        return None
    return _read(str(parse_file), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _read(path: str, _mtime_ns: int, _size: int) -> FailingParse | None:
    import msgpack  # dbt's own dependency: only reached when dbt wrote the file

    try:
        with open(path, "rb") as handle:
            data = msgpack.unpackb(
                handle.read(), raw=False, strict_map_key=False, ext_hook=msgpack.ExtType
            )
        root = _root_of(data)
        if root is None:
            return None
        files: dict[str, ParsedFile] = {}
        roots: dict[str, str] = {}  # project name -> its dir relative to the root project
        searched: set[str] = set()
        for entry in (data.get("files") or {}).values():
            where = entry.get("path") or {}
            project_root = str(where.get("project_root") or "")
            if project_root != root and not project_root.startswith(root + "/"):
                continue  # dbt's and the adapter's own macros
            local = os.path.relpath(project_root, root) if project_root != root else ""
            roots[str(entry.get("project_name"))] = local
            rel = PurePosixPath(local, str(where["searched_path"]), str(where["relative_path"]))
            checksum = entry.get("checksum") or {}
            files[rel.as_posix()] = ParsedFile(
                file_type=str(entry.get("parse_file_type")),
                checksum_name=str(checksum.get("name")),
                checksum=str(checksum.get("checksum")),
                nodes=tuple(str(n) for n in entry.get("nodes") or ()),
            )
            if not local:
                searched.add(str(where["searched_path"]))
        hashes = (data.get("state_check") or {}).get("project_hashes") or {}
        project_hashes = {
            roots[name]: str((value or {}).get("checksum")) for name, value in hashes.items()
            if name in roots
        }  # fmt: skip
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if "" not in project_hashes:
        return None  # not a parse of this project
    return FailingParse(files=files, project_hashes=project_hashes, searched=frozenset(searched))


def _root_of(data: dict[str, Any]) -> str | None:
    """The root project's dir as dbt recorded it (as given: `.` when run with `--project-dir
    .`); its packages' dirs start with it."""
    name = (data.get("metadata") or {}).get("project_name")
    for key, entry in (data.get("files") or {}).items():
        if str(key).startswith(f"{name}://"):
            return str(entry["path"]["project_root"]).rstrip("/") or "/"
    return None


def agrees_with_manifest(parse: FailingParse, manifest_file: Path) -> bool:
    """Whether the parse describes the failing run's files: every node of the root project
    in the run's manifest has the checksum the parse has for its file. A parse dbt did not
    rewrite (nothing had changed since it) agrees; one a later run rewrote after other edits
    does not, and is not used."""
    try:
        stat = manifest_file.stat()
    except OSError:
        return False
    read = _read_manifest(str(manifest_file), stat.st_mtime_ns, stat.st_size)
    if read is None:
        return False
    for rel, checksum in read[0].items():
        parsed = parse.files.get(rel)
        if parsed is None or (parsed.checksum_name == "sha256" and parsed.checksum != checksum):
            return False
    return True


def manifest_node_names(manifest_file: Path) -> frozenset[str] | None:
    """The names of the models, seeds and snapshots in a manifest.json (packages' too)."""
    try:
        stat = manifest_file.stat()
    except OSError:
        return None
    read = _read_manifest(str(manifest_file), stat.st_mtime_ns, stat.st_size)
    return None if read is None else read[1]


@lru_cache(maxsize=4)
def _read_manifest(
    path: str, _mtime_ns: int, _size: int
) -> tuple[dict[str, str], frozenset[str]] | None:
    """The root project's node files with their checksums, and the names of the nodes that
    are relations, in a manifest.json."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        project = data["metadata"]["project_name"]
        found: dict[str, str] = {}
        names: set[str] = set()
        for node in (data.get("nodes") or {}).values():
            if node.get("resource_type") in ("model", "seed", "snapshot"):
                names.add(str(node["name"]))
            checksum = node.get("checksum") or {}
            if node.get("package_name") != project or checksum.get("name") != "sha256":
                continue
            found[str(node["original_file_path"])] = str(checksum["checksum"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return found, frozenset(names)


def changed_node_names(parse: FailingParse, project_dir: Path) -> tuple[str, ...] | None:
    """Names of the nodes whose files differ between the failing run and `project_dir` (the
    candidate's worktree); None when something else differs (see the module docstring)."""
    for local, digest in parse.project_hashes.items():
        try:
            text = (project_dir / local / "dbt_project.yml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
            return None
    names: set[str] = set()
    for rel, parsed in parse.files.items():
        path = project_dir / rel
        if not path.is_file():
            return None  # deleted or renamed
        if parsed.checksum_name != "sha256":  # a big seed: dbt compares its path only
            continue
        if file_checksum(path) == parsed.checksum:
            continue
        if parsed.file_type not in _NODE_FILE_TYPES or not parsed.nodes:
            return None
        names.update(uid.split(".")[2] for uid in parsed.nodes if uid.count(".") >= 2)
    added = _new_files(parse, project_dir)
    if added is None:
        return None
    for rel in added:
        name = _new_node_name(rel, read_project_config(project_dir))
        if name is None:
            return None
        names.add(name)
    return tuple(sorted(names))


def _searched_dirs(parse: FailingParse, config: dict[str, object]) -> set[str]:
    dirs = set(parse.searched)
    for key, default in _PATH_KEYS:
        dirs.update(config_paths(config, key, [default] if default else []))
    return {d.strip("/") for d in dirs if d and not d.startswith("..") and d not in (".", "/")}


def _new_files(parse: FailingParse, project_dir: Path) -> list[str] | None:
    """Files under the root project's paths that the failing run did not read; None when
    dbt_project.yml does not say (it then differs anyway, or reads every path)."""
    config = read_project_config(project_dir)
    if not config:
        return None
    found: list[str] = []
    for top in sorted(_searched_dirs(parse, config)):
        base = project_dir / top
        for current, subdirs, filenames in os.walk(base):
            subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS and not d.startswith(".")]
            for filename in filenames:
                if not filename.endswith(_PARSED_SUFFIXES):
                    continue
                rel = (Path(current) / filename).relative_to(project_dir).as_posix()
                if rel not in parse.files:
                    found.append(rel)
    return found


def _new_node_name(rel: str, config: dict[str, object]) -> str | None:
    """The node a new file defines, when its name is its file's: a model, seed or singular
    test; None for anything whose effect only dbt can judge (YAML, macros, snapshots)."""
    path = PurePosixPath(rel)

    def under(key: str, default: str) -> bool:
        return any(path.is_relative_to(d.strip("/")) for d in config_paths(config, key, [default]))

    if path.suffix in (".sql", ".py") and under("model-paths", "models"):
        return path.stem
    if path.suffix == ".csv" and under("seed-paths", "seeds"):
        return path.stem
    if path.suffix == ".sql" and under("test-paths", "tests") and "generic" not in path.parts:
        return path.stem
    return None

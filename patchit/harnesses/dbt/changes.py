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
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from patchit.evidence.project_index import config_paths, read_project_config
from patchit.evidence.unit_files import read_manifest
from patchit.harnesses.dbt.clean_files import clean_blobs
from patchit.harnesses.dbt.slice import SliceGraph, graph_of

# Files dbt reads under a project's paths; a new one of these types is a change.
_PARSED_SUFFIXES = (".sql", ".py", ".yml", ".yaml", ".csv", ".md")
_NODE_FILE_TYPES = frozenset({"model", "seed", "snapshot", "analysis", "singular_test"})
_PATH_KEYS = (
    ("model-paths", "models"), ("seed-paths", "seeds"), ("test-paths", "tests"),
    ("analysis-paths", "analyses"), ("macro-paths", "macros"), ("snapshot-paths", "snapshots"),
    ("function-paths", "functions"), ("docs-paths", None),
)  # fmt: skip


@dataclass(frozen=True)
class ParsedFile:
    file_type: str
    checksum_name: str
    checksum: str
    nodes: tuple[str, ...]  # unique ids defined in the file
    local: str = ""  # its project's dir relative to the root project's ("": the root's)


@dataclass(frozen=True)
class Changes:
    """What a candidate's worktree changed against the failing run's parse."""

    names: tuple[str, ...]  # the nodes it edited or added, by name
    # the root project's files that differ (project-relative), when it added no file and every
    # file that differs is the root project's; else None
    files: tuple[str, ...] | None


@dataclass(frozen=True)
class FailingParse:
    """The failing run's view of the project: its files (by path relative to the project
    dir) and the hash of each local project's `dbt_project.yml` (by the project's dir)."""

    files: dict[str, ParsedFile]
    project_hashes: dict[str, str]  # "" for the root project, "dbt_packages/x" for a package
    searched: frozenset[str]  # the root project's searched paths the run read files from
    invocation_id: str | None
    names: dict[str, str]  # node unique id -> its name
    facts: dict[str, str]  # what YAML and macros decide, per unique id (see _facts)


def file_checksum(path: Path) -> str | None:
    """dbt's checksum of a project file; None when it cannot be read as UTF-8."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


def _checksum(root: str, rel: str, blob: str | None) -> str | None:
    """`file_checksum` of `root`/`rel`, remembered by blob for a file git knows to be as
    committed (its path made only when it is read: 4,000 files a candidate)."""
    digest = _BY_BLOB.get(blob) if blob is not None else None
    if digest is not None:
        return digest
    digest = file_checksum(Path(root, rel))
    if blob is not None and digest is not None:
        if len(_BY_BLOB) >= _BY_BLOB_MAX:
            _BY_BLOB.clear()  # a new project's files; the next candidate fills it again
        _BY_BLOB[blob] = digest
    return digest


_BY_BLOB: dict[str, str] = {}
_BY_BLOB_MAX = 50_000


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
            local = _local_dir(str(where.get("project_root") or ""), root)
            if local is None:
                continue  # dbt's and the adapter's own macros, from the installation
            if local == _UNRELATED:
                return None  # a project dbt read from somewhere this cannot place
            roots[str(entry.get("project_name"))] = local
            rel = PurePosixPath(local, str(where["searched_path"]), str(where["relative_path"]))
            checksum = entry.get("checksum") or {}
            files[rel.as_posix()] = ParsedFile(
                file_type=str(entry.get("parse_file_type")),
                checksum_name=str(checksum.get("name")),
                checksum=str(checksum.get("checksum")),
                nodes=tuple(str(n) for n in entry.get("nodes") or ()),
                local=local,
            )
            if not local:
                searched.add(str(where["searched_path"]))
        hashes = (data.get("state_check") or {}).get("project_hashes") or {}
        project_hashes = {
            roots[name]: str((value or {}).get("checksum")) for name, value in hashes.items()
            if name in roots
        }  # fmt: skip
        names = {str(uid): str(node.get("name")) for uid, node in (data.get("nodes") or {}).items()}
        facts = _facts(data, (data.get("metadata") or {}).get("project_name"))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if "" not in project_hashes:
        return None  # not a parse of this project
    return FailingParse(
        files=files, project_hashes=project_hashes, searched=frozenset(searched),
        invocation_id=(data.get("metadata") or {}).get("invocation_id"), names=names,
        facts=facts,
    )  # fmt: skip


_UNRELATED = "\0"


def _local_dir(project_root: str, root: str) -> str | None:
    """A project's dir relative to the root project's ("" for the root itself); None for one
    outside it (dbt's own include dirs), `_UNRELATED` when the two cannot be related (one
    recorded relative, the other absolute, and not dbt's own)."""
    here, top = os.path.normpath(project_root), os.path.normpath(root)
    if os.path.isabs(here) != os.path.isabs(top):
        # `--project-dir .` records the root and its packages relative, dbt's own absolute
        return None if os.path.isabs(here) else _UNRELATED
    rel = os.path.relpath(here, top)
    if rel == ".":
        return ""
    return None if rel == ".." or rel.startswith("../") else PurePosixPath(rel).as_posix()


def _root_of(data: dict[str, Any]) -> str | None:
    """The root project's dir as dbt recorded it (as given: `.` when run with `--project-dir
    .`)."""
    name = (data.get("metadata") or {}).get("project_name")
    for key, entry in (data.get("files") or {}).items():
        if str(key).startswith(f"{name}://"):
            return str(entry["path"]["project_root"]) or "."
    return None


# What a node's YAML sets, and a macro's body: what must agree between a parse and a
# manifest of two different runs (node checksums cover only the SQL and CSV files).
_FACT_FIELDS = ("patch_path", "description", "config", "columns", "tags", "meta")


def _facts(data: dict[str, Any], project: object) -> dict[str, str]:
    """The root project's nodes' YAML-set fields and its macros' bodies, by unique id."""
    found: dict[str, str] = {}
    for uid, node in (data.get("nodes") or {}).items():
        if node.get("package_name") == project:
            picked = {k: node.get(k) for k in _FACT_FIELDS}
            found[str(uid)] = json.dumps(picked, sort_keys=True, default=str)
    for uid, macro in (data.get("macros") or {}).items():
        if macro.get("package_name") == project:
            found[str(uid)] = str(macro.get("macro_sql"))
    return found


def agrees_with_manifest(parse: FailingParse, manifest_file: Path) -> bool:
    """Whether the parse describes the failing run's files: written by that run (the same
    invocation id), or else one dbt did not rewrite because nothing had changed since it,
    which agrees with the run's manifest on every node's file checksum, YAML-set fields and
    macro. One a later run rewrote after other edits does not agree, and is not used."""
    try:
        stat = manifest_file.stat()
    except OSError:
        return False
    read = _read_manifest(str(manifest_file), stat.st_mtime_ns, stat.st_size)
    if read is None:
        return False
    if parse.invocation_id and parse.invocation_id == read.invocation_id:
        return True
    for rel, checksum in read.checksums.items():
        parsed = parse.files.get(rel)
        if parsed is None or (parsed.checksum_name == "sha256" and parsed.checksum != checksum):
            return False
    return all(parse.facts.get(uid) == fact for uid, fact in read.facts.items()) and len(
        parse.facts
    ) == len(read.facts)


def manifest_node_names(manifest_file: Path) -> frozenset[str] | None:
    """The names of the models, seeds and snapshots in a manifest.json (packages' too)."""
    try:
        stat = manifest_file.stat()
    except OSError:
        return None
    read = _read_manifest(str(manifest_file), stat.st_mtime_ns, stat.st_size)
    return None if read is None else read.names


def models_of_tests(manifest_file: Path) -> dict[str, str]:
    """Each generic test of a manifest.json, by unique id and by name, -> the model it tests."""
    try:
        stat = manifest_file.stat()
    except OSError:
        return {}
    read = _read_manifest(str(manifest_file), stat.st_mtime_ns, stat.st_size)
    return {} if read is None else read.tested


def manifest_graph(manifest_file: Path) -> SliceGraph | None:
    """What a manifest.json says about relations, for the warehouse slice (`slice`); read
    with the rest of it, once per manifest."""
    try:
        stat = manifest_file.stat()
    except OSError:
        return None
    read = _read_manifest(str(manifest_file), stat.st_mtime_ns, stat.st_size)
    return None if read is None else read.graph


@dataclass(frozen=True)
class _Manifest:
    checksums: dict[str, str]  # the root project's node files -> their checksums
    names: frozenset[str]  # the nodes that are relations
    invocation_id: str | None
    facts: dict[str, str]
    tested: dict[str, str]  # a test's unique id, and its name -> the model it tests
    graph: SliceGraph


@lru_cache(maxsize=4)
def _read_manifest(path: str, _mtime_ns: int, _size: int) -> _Manifest | None:
    try:
        data = read_manifest(Path(path))  # shared with the evidence and the screen
        project = data["metadata"]["project_name"]
        found: dict[str, str] = {}
        names: set[str] = set()
        nodes = data.get("nodes") or {}
        tested: dict[str, str] = {}
        for uid, node in nodes.items():
            if node.get("resource_type") in ("model", "seed", "snapshot"):
                names.add(str(node["name"]))
            model = nodes.get(str(node.get("attached_node") or "")) or {}
            if node.get("resource_type") == "test" and model.get("resource_type") == "model":
                tested[str(uid)] = tested[str(node["name"])] = str(model["name"])
            checksum = node.get("checksum") or {}
            if node.get("package_name") != project or checksum.get("name") != "sha256":
                continue
            found[str(node["original_file_path"])] = str(checksum["checksum"])
        facts = _facts(data, project)
        invocation = data["metadata"].get("invocation_id")
        relations: SliceGraph = graph_of(data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return _Manifest(found, frozenset(names), invocation, facts, tested, relations)


def changed_node_names(parse: FailingParse, project_dir: Path) -> tuple[str, ...] | None:
    """Names of the nodes whose files differ between the failing run and `project_dir` (the
    candidate's worktree); None when something else differs (see the module docstring)."""
    changes = candidate_changes(parse, project_dir)
    return changes.names if changes is not None else None


def candidate_changes(
    parse: FailingParse, project_dir: Path, clean: dict[str, str] | None = None
) -> Changes | None:
    """`changed_node_names`, with the files that differ; None when it is None. `clean`: the
    worktree's `clean_blobs`, when the caller has them already."""
    for local, digest in parse.project_hashes.items():
        try:
            text = (project_dir / local / "dbt_project.yml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
            return None
    if (project_dir / ".dbtignore").exists():
        return None  # which files dbt reads is the ignore file's to say
    names: set[str] = set()
    files: list[str] | None = []
    if clean is None:
        clean = clean_blobs(project_dir)  # hashed once per blob, not once per candidate
    root = str(project_dir)
    for rel, parsed in parse.files.items():
        blob = clean.get(rel)  # git's clean files exist (a deleted one is modified)
        if blob is None and not os.path.isfile(os.path.join(root, rel)):
            return None  # deleted or renamed
        if parsed.checksum_name != "sha256":  # a big seed: dbt compares its path only
            continue
        if _checksum(root, rel, blob) == parsed.checksum:
            continue
        if parsed.file_type not in _NODE_FILE_TYPES or not parsed.nodes:
            return None
        names.update(parse.names.get(uid, "") for uid in parsed.nodes)
        if files is not None and not parsed.local:
            files.append(rel)
        else:
            files = None
    config = read_project_config(project_dir)
    added = _new_files(parse, project_dir, config)
    if added is None:
        return None
    for rel in added:
        name = _new_node_name(rel, config)
        if name is None:
            return None
        names.add(name)
    if not all(_NAME.fullmatch(name) for name in names):
        return None  # a name dbt's selector syntax would split or miss
    return Changes(tuple(sorted(names)), tuple(sorted(files)) if files is not None and not added
                   else None)  # fmt: skip


_NAME = re.compile(r"\w+")


def _searched_dirs(parse: FailingParse, config: dict[str, object]) -> set[str] | None:
    """The root project's paths dbt reads; None when one is the project itself, above it or
    absolute (a walk would not match dbt's)."""
    dirs = set(parse.searched)
    for key, default in _PATH_KEYS:
        dirs.update(config_paths(config, key, [default] if default else []))
    cleaned: set[str] = set()
    for entry in dirs:
        norm = os.path.normpath(entry) if entry else "."
        if norm in (".", "/") or os.path.isabs(norm) or norm == ".." or norm.startswith("../"):
            return None
        cleaned.add(PurePosixPath(norm).as_posix())
    return cleaned


def _new_files(
    parse: FailingParse, project_dir: Path, config: dict[str, object]
) -> list[str] | None:
    """Files under the root project's paths that the failing run did not read (every
    directory, as dbt walks them); None when dbt_project.yml cannot say which paths."""
    searched = _searched_dirs(parse, config) if config else None
    if searched is None:
        return None
    found: list[str] = []
    prefix = len(str(project_dir)) + 1  # strings, not Paths: 2,000 files per candidate
    for top in sorted(searched):
        for current, _subdirs, filenames in os.walk(project_dir / top):
            for filename in filenames:
                if not filename.lower().endswith(_PARSED_SUFFIXES):
                    continue
                rel = os.path.join(current, filename)[prefix:].replace(os.sep, "/")
                if rel not in parse.files:
                    found.append(rel)
    return found


def _new_node_name(rel: str, config: dict[str, object]) -> str | None:
    """The node a new file defines, when its name is its file's: a model, seed or singular
    test; None for anything whose effect only dbt can judge (YAML, macros, snapshots)."""
    path = PurePosixPath(rel)
    suffix = path.suffix.lower()

    def under(key: str, default: str) -> bool:
        return any(path.is_relative_to(d.strip("/")) for d in config_paths(config, key, [default]))

    if suffix in (".sql", ".py") and under("model-paths", "models"):
        return path.stem
    if suffix == ".csv" and under("seed-paths", "seeds"):
        return path.stem
    in_tests = under("test-paths", "tests") and not {"generic", "fixtures"} & set(path.parts)
    if suffix == ".sql" and in_tests:
        return path.stem
    return None

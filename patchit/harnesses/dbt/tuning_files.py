"""The root project's files taken from the saved parse, where the harness knows they are its.

Every dbt run starts by listing each project's directories and reading and hashing every file
in them, to compare each with the saved parse's record (2,000 SQL files and 14 YAML files on a
2,000-model project: ~85 ms of a warm run). The harness has made that comparison already, for
the same worktree (`changes.candidate_changes`: dbt's checksum of every file the failing run
parsed, the deleted and new files under the project's paths), and names the files that differ
in the request (`saved_parse.changed_files`), only when every difference is an edited model,
snapshot, analysis or singular test of the root project and nothing was added or deleted.

Then the root project's files are the saved parse's, each with its saved checksum, and the
named ones are read and hashed as dbt reads them (`load_file_contents`, stripped): what dbt's
own walk would give, without the walk. A file's contents are read from the worktree when
something first asks for them (a file partial parsing schedules again, or a full parse), so
nothing dbt parses goes without its text. A properties file keeps its saved parsed YAML, as
dbt keeps it for a file whose time did not move. The other projects (packages, dbt's own
macros) are read from disk by dbt's own code, as before.

dbt's own reader runs instead whenever the saved parse was not the kept one dbt accepted
(`saved_parse.used`), the request named no files, or anything named is not a file of the saved
parse's root project of those kinds.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from patchit.harnesses.dbt import saved_parse as dbt_saved_parse
from patchit.harnesses.dbt.tuning_base import replace_once

# Files whose text is only ever parsed as SQL/Python: a changed one is read as dbt reads it.
_EDITABLE = frozenset({"model", "snapshot", "analysis", "singular_test"})
# Kinds the root project's saved files may be; anything else (a unit-test fixture, a kind a
# newer dbt adds) leaves the reading to dbt. A hook's file is dbt_project.yml, which a parse
# adds itself: dbt's reader never lists it, nor does this one.
_KNOWN = frozenset({*_EDITABLE, "macro", "generic_test", "seed", "schema", "docs", "hook"})

_read_from_saved = False  # whether this process's (fork's) latest parse took the saved files


def read_from_saved() -> bool:
    return _read_from_saved


def forget() -> None:
    global _read_from_saved
    _read_from_saved = False


def install() -> None:
    try:
        manifest_module = importlib.import_module("dbt.parser.manifest")
    except ImportError:
        return
    replace_once(manifest_module, "ReadFilesFromFileSystem", _make_reader)


def _make_reader(dbt_reader: Any) -> Any:
    lazy = _lazy_class()

    def reader(all_projects: Any, files: Any, saved_files: Any) -> Any:
        own = dbt_reader(all_projects=all_projects, files=files, saved_files=saved_files)
        changed = dbt_saved_parse.changed_files(saved_files)
        if changed is None or lazy is None:
            return own
        root = _root_name(all_projects)
        if root is None or not _usable(saved_files, root, changed):
            return own
        return _FromSavedParse(own, root, changed, lazy)

    return reader


def _lazy_class() -> Any:
    """dbt's SourceFile, with its contents read from the file when first asked for."""
    try:
        from dbt.contracts.files import FilePath, SourceFile
        from dbt_common.clients.system import load_file_contents
    except ImportError:
        return None

    class LazySourceFile(SourceFile):
        @property
        def contents(self) -> str | None:
            value = self.__dict__.get("contents")
            if value is None and isinstance(self.path, FilePath):
                value = load_file_contents(self.path.absolute_path, strip=True)
                self.__dict__["contents"] = value
            return value

        @contents.setter
        def contents(self, value: str | None) -> None:
            self.__dict__["contents"] = value

    return LazySourceFile


def _root_name(all_projects: Any) -> str | None:
    """The root project's name: the one project whose files the saved parse rooted at the
    candidate's worktree (`saved_parse.rebase_manifest`)."""
    root = dbt_saved_parse.armed_root()
    names = [n for n, p in all_projects.items() if os.path.realpath(p.project_root) == root]
    return names[0] if len(names) == 1 and root is not None else None


def _usable(saved_files: Any, root: str, changed: list[str]) -> bool:
    kinds: dict[str, str] = {}
    for file_id, saved in saved_files.items():
        if saved.project_name == root:
            kinds[file_id] = str(getattr(saved.parse_file_type, "value", saved.parse_file_type))
    if not kinds or not set(kinds.values()) <= _KNOWN:
        return False
    return all(kinds.get(f"{root}://{rel}") in _EDITABLE for rel in changed)


class _FromSavedParse:
    """dbt's `ReadFilesFromFileSystem` for one run: the root project from the saved parse,
    every other project by dbt's own reader (`own`)."""

    def __init__(self, own: Any, root: str, changed: list[str], lazy: Any) -> None:
        self.own, self.root, self.changed, self.lazy = own, root, changed, lazy

    @property
    def files(self) -> Any:
        return self.own.files

    @property
    def project_parser_files(self) -> Any:
        return self.own.project_parser_files

    def read_files(self) -> None:
        global _read_from_saved
        from dbt.parser.read_files import get_file_types_for_project

        for name, project in self.own.all_projects.items():
            file_types = get_file_types_for_project(project)  # type: ignore[no-untyped-call]
            if name == self.root:
                self._root_files(file_types)
            else:
                self.own.read_files_for_project(project, file_types)
        _read_from_saved = True

    def _root_files(self, file_types: dict[Any, dict[str, Any]]) -> None:
        from dbt.artifacts.resources.base import FileHash
        from dbt.contracts.files import FilePath, ParseFileType, SchemaSourceFile, SourceFile
        from dbt_common.clients.system import load_file_contents

        parsers: dict[str, list[str]] = {info["parser"]: [] for info in file_types.values()}
        by_type = {ft: info["parser"] for ft, info in file_types.items()}
        changed = {f"{self.root}://{rel}" for rel in self.changed}
        files = self.own.files
        for file_id, saved in self.own.saved_files.items():
            if saved.project_name != self.root:
                continue
            kind = saved.parse_file_type
            parser = by_type.get(kind)
            if parser is None:
                continue  # not a file dbt's reader lists (a hook's dbt_project.yml)
            fields = {"path": saved.path, "checksum": saved.checksum,
                      "project_name": saved.project_name, "parse_file_type": kind}  # fmt: skip
            if kind == ParseFileType.Schema:
                copy: Any = SchemaSourceFile(**fields)
                copy.dfy = saved.dfy  # dbt's own keep for a file whose time did not move
            elif kind == ParseFileType.Seed:
                copy = SourceFile(**fields, contents="")  # as dbt's seed reader leaves it
            else:
                copy = self.lazy(**fields)
            if file_id in changed:
                path = saved.path
                text = load_file_contents(path.absolute_path, strip=True)
                copy.path = FilePath(searched_path=path.searched_path,
                                     relative_path=path.relative_path,
                                     modification_time=os.path.getmtime(path.absolute_path),
                                     project_root=path.project_root)  # fmt: skip
                copy.contents = text
                copy.checksum = FileHash.from_contents(text)
            files[file_id] = copy
            parsers[parser].append(file_id)
        self.own.project_parser_files[self.root] = parsers

"""What the warm dbt worker changes in dbt's parse and selection (see `tuning` for the rest).

Both give dbt's own answer, for a fraction of the work on a big project:

- A properties (YAML) file whose contents are the saved parse's is not parsed again: dbt
  takes the saved file's parsed YAML itself when the file's modification time did not move,
  and a candidate's worktree is a fresh checkout, where every file's time moved. Here the file
  is read and hashed as dbt would, and equal contents stand for an unmoved time. On a 2,000-model
  project that was 14 YAML files holding 2,534 tests, parsed and checked for duplicate keys
  on every run.
- A name selector (`--select int_549`, no dots, no wildcards) looks its nodes up in an index of
  the names it can match, made once a run, instead of matching it against every node of the
  project (dbt's `QualifiedNameSelectorMethod.search`, once per selector, three times a
  build): for such a selector dbt matches a node whose name (the fqn's leaf) is the selector,
  or whose package or first folder is. Every node found is matched by dbt's own function
  again, and versioned models are always asked that way.
- dbt's check that no two nodes share a relation name makes each node's relation as the
  adapter does (`create_from`); the quoting policy it merges for each (the adapter's default,
  the project's, the node's) is merged once per distinct pair of project and node quoting,
  where the adapter makes relations as dbt's base class or dbt-duckdb's does. The worker
  names the relations of the saved parse's nodes once, when it decodes the parse
  (`remember_relation_names`, with the adapter's default quoting), and a run's check takes
  the name of a node whose every input to it (quoting, database, schema, identifier,
  catalog) is the same, instead of making its relation again (2,000 a run).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from patchit.harnesses.dbt.tuning_base import replace_once

_WILDCARDS = ("*", "?", "[", "]")
_INDEX = "_patchit_name_index"  # on a run's manifest: (node count, index, always-asked)


def install() -> None:
    _schema_files_by_contents()
    _name_selection_indexed()
    _relation_names_merged_once()


def _schema_files_by_contents() -> None:
    try:
        read_files = importlib.import_module("dbt.parser.read_files")
        from dbt.artifacts.resources.base import FileHash
        from dbt.contracts.files import ParseFileType, SchemaSourceFile
    except ImportError:
        return

    def make(load: Any) -> Any:
        def load_source_file(path: Any, parse_file_type: Any, project_name: str,
                             saved_files: Any) -> Any:  # fmt: skip
            if parse_file_type != ParseFileType.Schema or not saved_files:
                return load(path, parse_file_type, project_name, saved_files)
            empty = FileHash.empty()  # type: ignore[no-untyped-call]
            source_file = SchemaSourceFile(path=path, checksum=empty, project_name=project_name,
                                           parse_file_type=parse_file_type)  # fmt: skip
            old = saved_files.get(source_file.file_id)
            moved = path.modification_time == 0.0 or (
                old is not None and old.path.modification_time != path.modification_time
            )
            if old is None or not moved or not old.dfy:
                return load(path, parse_file_type, project_name, saved_files)
            contents = read_files.load_file_contents(path.absolute_path, strip=True)
            checksum = FileHash.from_contents(contents)
            if checksum != old.checksum:
                return load(path, parse_file_type, project_name, saved_files)
            source_file.checksum = old.checksum  # as dbt's own path for an unmoved file
            source_file.dfy = old.dfy
            return source_file

        return load_source_file

    replace_once(read_files, "load_source_file", make)


class _Everything:
    """Stands for "every node" where dbt's iterators ask `unique_id in included_nodes`."""

    def __contains__(self, _item: object) -> bool:
        return True


def _plain_name(selector: str) -> bool:
    return "." not in selector and not any(w in selector for w in _WILDCARDS)


def _keys(fqn: list[str]) -> set[str]:
    """The plain names that match a node with this (unversioned) fqn, scoped or not."""
    return {fqn[-1], fqn[0].split(".")[0], fqn[1].split(".")[0]}


_Found = list[tuple[str, Any]]  # (unique id, node)


def _index(method: Any) -> tuple[dict[str, _Found], _Found]:
    manifest = method.manifest
    kept = getattr(manifest, _INDEX, None)
    count = len(manifest.nodes)
    if kept is not None and kept[0] == count:
        return kept[1], kept[2]
    index: dict[str, _Found] = {}
    asked: _Found = []
    for unique_id, node in method.non_source_nodes(_Everything()):
        fqn = getattr(node, "fqn", None)
        if getattr(node, "is_versioned", False) or not isinstance(fqn, list) or len(fqn) < 2:
            asked.append((unique_id, node))
            continue
        for key in _keys(fqn):
            index.setdefault(key, []).append((unique_id, node))
    with contextlib.suppress(AttributeError, TypeError):
        setattr(manifest, _INDEX, (count, index, asked))
    return index, asked


def _name_selection_indexed() -> None:
    try:
        from dbt.graph.selector_methods import QualifiedNameSelectorMethod
    except ImportError:
        return

    def make(search: Any) -> Any:
        def indexed_search(self: Any, included_nodes: Any, selector: str) -> Iterator[Any]:
            if not isinstance(selector, str) or not _plain_name(selector):
                yield from search(self, included_nodes, selector)
                return
            index, asked = _index(self)
            for unique_id, node in index.get(selector, ()):
                if unique_id in included_nodes and self.node_is_match(selector, node.fqn, False):
                    yield unique_id
            for unique_id, node in asked:
                if unique_id in included_nodes and self.node_is_match(
                    selector, node.fqn, node.is_versioned
                ):
                    yield unique_id

        return indexed_search

    replace_once(QualifiedNameSelectorMethod, "search", make)


class _MergedOnce:
    """Stands for a relation class in dbt's uniqueness check: `create_from` as the class's
    own, with each distinct quoting policy merged once."""

    def __init__(self, cls: Any, deep_merge: Any) -> None:
        self.cls, self.deep_merge = cls, deep_merge
        self.policies: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.names: dict[tuple[Any, ...], str] = {}  # all of a relation's inputs -> its name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cls, name)

    def create_from(self, quoting: Any, relation_config: Any, **kwargs: Any) -> Any:
        cls = self.cls
        if kwargs or relation_config.resource_type == "source":
            return cls.create_from(quoting=quoting, relation_config=relation_config, **kwargs)
        try:
            key, config_quoting = _policy_key(quoting, relation_config)
            inputs = (key, *_parts(relation_config))
            named = self.names.get(inputs)
            policy = self.policies.get(key)
        except TypeError:  # something unhashable or unordered: as dbt does it
            return cls.create_from(quoting=quoting, relation_config=relation_config)
        if named is not None:
            return _Named(named)
        if policy is None:
            policy = self.deep_merge(cls.get_default_quote_policy().to_dict(omit_none=True),
                                     quoting.quoting, config_quoting, {})  # fmt: skip
            self.policies[key] = policy
        database, schema, identifier, catalog_name = inputs[1:]
        return cls.create(database=database, schema=schema, identifier=identifier,
                          quote_policy=dict(policy), catalog_name=catalog_name)  # fmt: skip

    def remember(self, quoting: Any, nodes: Any) -> None:
        """Name the relations of `nodes` with `quoting` (see the module docstring)."""
        self.names.clear()
        for node in nodes:
            if getattr(node, "is_relational", False):
                with contextlib.suppress(TypeError):
                    inputs = (_policy_key(quoting, node)[0], *_parts(node))
                    self.names[inputs] = str(self.create_from(quoting, node))


def _policy_key(quoting: Any, relation_config: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """What a relation's quote policy is merged from, as a key; and the node's own quoting.
    TypeError when that cannot be a key."""
    config_quoting = relation_config.quoting_dict
    config_quoting.pop("column", None)
    key = (tuple(sorted(quoting.quoting.items())), tuple(sorted(config_quoting.items())))
    hash(key)
    return key, config_quoting


def _parts(relation_config: Any) -> tuple[Any, Any, Any, Any]:
    """The rest of a node's relation: database, schema, identifier, catalog."""
    catalog_name = (
        relation_config.catalog_name
        if hasattr(relation_config, "catalog_name")
        else relation_config.config.get("catalog", None)
    )
    return (relation_config.database, relation_config.schema, relation_config.identifier,
            catalog_name)  # fmt: skip


class _Named:
    """A relation the check only names (`str`): its name, made in the worker already."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


def known_create_from() -> set[Any]:
    """The `create_from` functions whose relation depends only on what `_schema_key` and
    `_MergedOnce` read: dbt's base class's and dbt-duckdb's."""
    from dbt.adapters.base.relation import BaseRelation

    known = {BaseRelation.create_from.__func__}  # type: ignore[attr-defined]
    with contextlib.suppress(ImportError):
        from dbt.adapters.duckdb.relation import DuckDBRelation

        known.add(DuckDBRelation.create_from.__func__)  # type: ignore[attr-defined]
    return known


def _relation_names_merged_once() -> None:
    try:
        manifest_module = importlib.import_module("dbt.parser.manifest")
        from dbt_common.utils.dict import deep_merge
    except ImportError:
        return
    known = known_create_from()

    def make(by_name: Any) -> Any:
        def relation_class_by_name(name: str) -> Any:
            cls = by_name(name)
            if getattr(cls.create_from, "__func__", None) not in known:
                return cls
            if cls not in _STANDING:
                _STANDING[cls] = _MergedOnce(cls, deep_merge)
            return _STANDING[cls]

        return relation_class_by_name

    replace_once(manifest_module, "get_relation_class_by_name", make)


_STANDING: dict[Any, _MergedOnce] = {}  # dbt asks once per node: one stand-in per class


def remember_relation_names(manifest: Any) -> None:
    """In the worker, once a saved parse is decoded: its nodes' relation names, made with the
    adapter's default quoting (a project that sets its own is named in each run, as before).
    Nothing when the adapter's plugin is not loaded here yet."""
    for stand_in in _STANDING.values():
        stand_in.names.clear()
    try:
        by_name = importlib.import_module("dbt.parser.manifest").get_relation_class_by_name
        stand_in = by_name(str(manifest.metadata.adapter_type))
    except Exception:  # no plugin loaded for it: the runs name every relation
        return
    if isinstance(stand_in, _MergedOnce):
        default = stand_in.cls.get_default_quote_policy().to_dict(omit_none=True)
        stand_in.remember(_Quoting(default), manifest.nodes.values())


class _Quoting:
    """What a relation's `create_from` reads of dbt's config: its `quoting`."""

    def __init__(self, quoting: dict[str, Any]) -> None:
        self.quoting = quoting

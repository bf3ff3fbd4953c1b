"""The failing run's saved parse, deserialised once in the warm dbt worker, not once per run.

Each run of a warm worker is a fork of it (`serve`), and dbt starts every run by reading
its saved parse (`partial_parse.msgpack`): decoding the whole manifest, and on the first read
in a process, generating the decoders of every node type the project has. In a fork, all of
that is lost when the run ends, so every candidate paid it again (with writing the parse
back, 0.13 s of a 1 s warm run on 200 models).

A request may carry `saved_parse`: `{"source": the failing run's parse (a copy the harness
put where the worker can read it, not re-rooted), "sha256": the copy's hash, "root": the
candidate's project dir, "file": what the harness seeded in the run's target dir,
"changed_files": the root project's files that differ from it, when the harness knows them
(`tuning_files`)}`. The worker
decodes `source` before forking (`preload`, once per file, only when its hash is the
harness's: a run without Landlock could write where the copy is) and keeps it. In the fork,
when dbt reads `file`, it gets the kept manifest instead, re-rooted at `root` exactly as
`rebase_partial_parse` re-roots the file (`rebase_manifest`); dbt's own checks of it
(version, vars, profile, every file's checksum) run as before. The fork's copy is its own
(copy-on-write), so dbt may change it.

The seeded file is what dbt reads when the worker does not hold the decoded parse (see
`parses`). A run that partially parsed from the kept manifest does not write its parse
back (the next run starts from the failing run's parse again); one that parsed in full does,
as before.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import sys
from dataclasses import dataclass
from typing import Any

from patchit.harnesses.dbt import tuning_graph, tuning_parse
from patchit.harnesses.dbt.tuning_base import replace_once


@dataclass
class _Armed:
    manifest: Any
    root: str
    file: str
    used: bool = False  # dbt read it
    accepted: bool = False  # and started from it
    changed_files: list[str] | None = None  # the root project's files that differ from it


_kept: dict[tuple[str, int, int, int], Any] = {}
_armed: _Armed | None = None


def _key(path: str) -> tuple[str, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_ino, st.st_size, st.st_mtime_ns)


def preload(request: dict[str, Any], settle: bool = True) -> None:
    """In the worker, before the fork: decode the request's `saved_parse` source unless it
    is kept already. A source that cannot be read or decoded is left to dbt. The collector
    is off while it decodes (it would walk the half-made manifest again and again: half the
    decoding); `settle` collects what is garbage before the manifest is frozen in place (a
    worker that serves many runs; a one-run process leaves it)."""
    spec = request.get("saved_parse")
    if not isinstance(spec, dict) or not isinstance(spec.get("source"), str):
        return
    key = _key(spec["source"])
    if key is None or key in _kept:
        return
    try:
        from dbt.contracts.graph.manifest import Manifest
        from dbt.parser.manifest import extended_mashumuro_decoder

        with open(spec["source"], "rb") as fp:
            data = fp.read()
        if hashlib.sha256(data).hexdigest() != spec.get("sha256"):
            raise ValueError("its sha256 is not the harness's (changed since it was copied)")
        collecting = gc.isenabled()
        gc.disable()
        try:
            manifest = Manifest.from_msgpack(data, decoder=extended_mashumuro_decoder)
        finally:
            if collecting:
                gc.enable()
    except Exception as exc:  # dbt reads the seeded file itself, and says what is wrong
        print(f"patchit dbt worker: cannot preload {spec['source']}: {exc}", file=sys.stderr)
        return
    # One manifest at a time (an incident's); the one before may hold reference cycles, so the
    # collector gets it back before it goes.
    gc.unfreeze()
    _kept.clear()
    _kept[key] = manifest
    with contextlib.suppress(Exception):  # a head start for each run's uniqueness check only
        tuning_parse.remember_relation_names(manifest)
    with contextlib.suppress(Exception):  # and for its first edge maps (`_first_maps_kept`)
        manifest.build_parent_and_child_maps()  # type: ignore[no-untyped-call]
        manifest.__dict__[MAPS_AS_SAVED] = True
    if settle:  # a worker that serves many runs: each takes the graph linked here once
        with contextlib.suppress(Exception):  # (`tuning_graph`); else dbt links its own
            tuning_graph.remember(manifest)
    # Forks never traverse the kept manifest (or dbt's modules): their collections stay short.
    if settle:
        gc.collect()
    gc.freeze()


def holds(spec: dict[str, Any]) -> bool:
    """Whether the parse `spec` names is decoded and kept here."""
    key = _key(str(spec.get("source")))
    return key is not None and key in _kept


def used() -> bool:
    """Whether this fork's dbt started from the kept manifest (said in the reply)."""
    return _armed is not None and _armed.accepted


def arm(request: dict[str, Any]) -> None:
    """In the fork: the kept manifest stands in for the seeded file when dbt reads it."""
    global _armed
    spec = request.get("saved_parse")
    if not isinstance(spec, dict):
        return
    key = _key(str(spec.get("source")))
    manifest = _kept.get(key) if key is not None else None
    if manifest is not None and spec.get("root") and spec.get("file"):
        _armed = _Armed(manifest, str(spec["root"]), os.path.realpath(str(spec["file"])))
        changed = spec.get("changed_files")
        if isinstance(changed, list) and all(isinstance(c, str) for c in changed):
            _armed.changed_files = changed


def changed_files(saved_files: Any) -> list[str] | None:
    """The root project's files (relative paths) the harness found changed from the kept
    parse, when `saved_files` are the kept parse's and dbt accepted it; None otherwise (see
    `tuning_files`)."""
    armed = _armed
    if armed is None or not armed.accepted or armed.changed_files is None:
        return None
    return armed.changed_files if saved_files is armed.manifest.files else None


def armed_root() -> str | None:
    """The candidate's project dir the kept parse is rooted at in this run."""
    return os.path.realpath(_armed.root) if _armed is not None else None


def rebase_manifest(manifest: Any, new_root: str) -> None:
    """`snapshot.rebase_partial_parse` on the decoded manifest: every file's `project_root`
    and every node's (and disabled node's) `root_path` under the failing run's project root
    move to `new_root`; nothing else does."""
    old_root = _manifest_root(manifest)
    if old_root is None or old_root == new_root:
        return

    def moved(path: object) -> object:
        if isinstance(path, str) and (path == old_root or path.startswith(old_root + "/")):
            return new_root + path[len(old_root) :]
        return path

    for entry in manifest.files.values():
        where = getattr(entry, "path", None)
        if where is not None and hasattr(where, "project_root"):
            where.project_root = moved(where.project_root)
    nodes = list(manifest.nodes.values())
    for group in manifest.disabled.values():
        nodes.extend(group)
    for node in nodes:
        if hasattr(node, "root_path"):
            node.root_path = moved(node.root_path)


def _manifest_root(manifest: Any) -> str | None:
    """The failing run's project root, found as `snapshot._root_project_dir` finds it."""
    name = getattr(manifest.metadata, "project_name", None)
    if not isinstance(name, str):
        return None
    prefix = f"{name}://"
    for key, entry in manifest.files.items():
        if isinstance(key, str) and key.startswith(prefix):
            root = getattr(getattr(entry, "path", None), "project_root", None)
            if isinstance(root, str) and root:
                return root.rstrip("/") or None
    return None


def install() -> None:
    """Wrap dbt's reader and writer of the saved parse (once, in the worker)."""
    from dbt.parser.manifest import ManifestLoader

    read: Any = ManifestLoader.read_manifest_for_partial_parse
    write: Any = ManifestLoader.write_manifest_for_partial_parse
    if getattr(read, "_patchit", False):
        return

    def read_saved(self: Any) -> Any:
        armed = _armed
        if armed is None or armed.used or not _reads(self, armed.file):
            return read(self)
        armed.used = True
        rebase_manifest(armed.manifest, armed.root)
        with _decoding_to(armed.manifest):
            saved = read(self)
        armed.accepted = saved is not None  # None: dbt refused it, and said why
        return saved

    def write_saved(self: Any) -> Any:
        armed = _armed
        if armed is not None and armed.accepted and self.partially_parsing:
            return None  # the failing run's parse seeds the next run again
        return write(self)

    _first_maps_kept()
    read_saved._patchit = True  # type: ignore[attr-defined]
    ManifestLoader.read_manifest_for_partial_parse = read_saved  # type: ignore[method-assign]
    ManifestLoader.write_manifest_for_partial_parse = write_saved  # type: ignore[method-assign]


def _reads(loader: Any, file: str) -> bool:
    """Whether dbt's reader would read `file` (its own rule for the saved parse's path)."""
    from dbt.flags import get_flags

    flags: Any = get_flags()  # type: ignore[no-untyped-call]
    if not getattr(flags, "PARTIAL_PARSE", False):
        return False
    path = getattr(flags, "PARTIAL_PARSE_FILE_PATH", None) or os.path.join(
        loader.root_project.project_target_path, "partial_parse.msgpack"
    )
    return os.path.isfile(path) and os.path.realpath(path) == file


@contextlib.contextmanager
def _decoding_to(manifest: Any) -> Any:
    """dbt's `Manifest.from_msgpack` returns `manifest` for the duration (in a fork: one
    thread)."""
    from dbt.contracts.graph.manifest import Manifest

    original = Manifest.__dict__.get("from_msgpack")
    setattr(Manifest, "from_msgpack", classmethod(lambda cls, *_a, **_k: manifest))  # noqa: B010
    try:
        yield
    finally:
        if original is None:
            delattr(Manifest, "from_msgpack")
        else:
            setattr(Manifest, "from_msgpack", original)  # noqa: B010


MAPS_AS_SAVED = "_patchit_maps_as_saved"  # on a kept manifest: its edge maps are built


def _first_maps_kept() -> None:
    """The first time a run asks for the kept manifest's parent and child maps, it gets the
    ones the worker built when it decoded the parse: dbt asks first when it compares the
    saved parse with the project's files, before it changes the parse (or, nothing having
    changed, without changing it); every later call builds them again."""
    from dbt.contracts.graph.manifest import Manifest

    def make(build: Any) -> Any:
        def build_maps(self: Any) -> Any:
            armed = _armed
            kept = armed is not None and self is armed.manifest
            if kept and self.__dict__.pop(MAPS_AS_SAVED, 0):
                return None
            return build(self)

        return build_maps

    replace_once(Manifest, "build_parent_and_child_maps", make, layer="kept")

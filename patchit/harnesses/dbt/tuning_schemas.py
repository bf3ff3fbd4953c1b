"""The JSON schemas dbt validates configs against, made once per dbt install, not once per
process (see `tuning` for the rest).

dbt validates a node's config (and other parsed YAML) against a JSON schema it builds from the
config's dataclass the first time a process asks (`dbtClassMixin.json_schema`, kept per class
in an `lru_cache`): a dozen classes for a partial parse, about half a second of a fresh
process's run, paid by every `worker --once` and by every warm fork that validates a class
the worker's warm-up did not. A schema depends only on the class's code, so it is the same for
every process of one install of dbt, its adapters and mashumaro.

The warm worker makes the schemas of the config classes runs validate while it warms up
(before it serves any run: nothing of a user's project has run in it) and leaves them in a
file beside the warm-up's parse; the parent moves it into patchit's cache, and the next
worker and every fresh process start from it (`SCHEMAS_ENV`). A schema is taken from the
file only when the file was written under the same versions of dbt-core, dbt-common,
dbt-adapters, every installed dbt adapter, mashumaro and Python, for a class of the same
module and name; any other class is made as dbt makes it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

SCHEMAS_ENV = "PATCHIT_DBT_SCHEMAS"  # the cached file a process starts from (read-only)
SCHEMAS_SAVE_ENV = "PATCHIT_DBT_SCHEMAS_SAVE"  # where a worker leaves its own
SCHEMAS_FILE = Path("dbt") / "warm-up" / "json-schemas.json"  # under patchit's cache

_DISTRIBUTIONS = (
    "dbt-core", "dbt-common", "dbt-adapters", "dbt-duckdb", "dbt-postgres", "dbt-snowflake",
    "mashumaro",
)  # fmt: skip
# Config classes runs validate, made in the warm-up beside those its build asks for
_CLASSES = (
    ("dbt.artifacts.resources", "ModelConfig"),
    ("dbt.artifacts.resources", "SeedConfig"),
    ("dbt.artifacts.resources", "SnapshotConfig"),
    ("dbt.artifacts.resources", "TestConfig"),
    ("dbt.artifacts.resources", "SourceConfig"),
    ("dbt.artifacts.resources", "ExposureConfig"),
    ("dbt.artifacts.resources", "UnitTestConfig"),
    ("dbt.artifacts.resources", "NodeConfig"),
)

_loaded: dict[str, Any] = {}  # class name -> schema, from the cached file
_made: dict[str, Any] = {}  # class name -> schema, made in this process


def install() -> None:
    """`dbtClassMixin.json_schema` answers from the loaded schemas first."""
    try:
        from dbt_common.dataclass_schema import dbtClassMixin
    except ImportError:
        return
    current = dbtClassMixin.__dict__.get("json_schema")
    make = getattr(current, "__func__", None)
    if make is None or getattr(make, "_patchit", False):
        return

    def json_schema(cls: Any) -> Any:
        name = _name(cls)
        schema = _loaded.get(name)
        if schema is None:
            schema = make(cls)
            _made.setdefault(name, schema)
        return schema

    json_schema._patchit = True  # type: ignore[attr-defined]
    json_schema.dbt_original = make  # type: ignore[attr-defined]
    dbtClassMixin.json_schema = classmethod(json_schema)  # type: ignore[assignment,method-assign]


def _name(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def fingerprint() -> dict[str, str | None]:
    """The versions a schema file holds for: a file written under others is not read."""
    found: dict[str, str | None] = {"python": sys.version}
    for name in _DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def load(path: str | None) -> int:
    """Take the schemas of the file at `path` when it was written under these versions; how
    many (0 when there is no such file, or it is another install's)."""
    if not path:
        return 0
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    if not isinstance(data, dict) or data.get("versions") != fingerprint():
        return 0
    schemas = data.get("schemas")
    if not isinstance(schemas, dict):
        return 0
    _loaded.update((k, v) for k, v in schemas.items() if isinstance(v, dict))
    return len(_loaded)


def make_common() -> None:
    """Make the schemas of the config classes runs validate (`_CLASSES`), in the worker."""
    for module, name in _CLASSES:
        with contextlib.suppress(Exception):  # a class this dbt lacks: the others still
            getattr(importlib.import_module(module), name).json_schema()


def save(path: str | None) -> None:
    """Leave every schema this process holds at `path` (replaced whole, never half-written):
    only those that read back from JSON as they are."""
    if not path or not (_made or _loaded):
        return
    schemas = dict(_loaded)
    for name, schema in _made.items():
        with contextlib.suppress(TypeError, ValueError):
            if json.loads(json.dumps(schema)) == schema:
                schemas[name] = schema
    partial = f"{path}.{os.getpid()}.part"
    try:
        with open(partial, "w", encoding="utf-8") as out:
            json.dump({"versions": fingerprint(), "schemas": schemas}, out)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)
